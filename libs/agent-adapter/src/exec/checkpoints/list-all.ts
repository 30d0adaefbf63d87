import type { CheckpointStore, ListQuery, RunHead } from './checkpoint-store';

/**
 * Every run head `query` lists, page after page (the store's `before` cursor), for the scans that
 * visit them all: prune, the restore mark, `verify --all`, the sweep's audit of ended heads. One
 * page is held at a time.
 */
export async function* listAll(
  store: CheckpointStore,
  query: Omit<ListQuery, 'before'> = {},
): AsyncGenerator<RunHead, void, undefined> {
  for (let before: string | undefined; ;) {
    const page = await store.list({
      ...query,
      ...(before !== undefined && { before }),
    });
    yield* page.runs;
    if (page.next === undefined) return;
    before = page.next;
  }
}

/** Every run id `listHeadless` finds, page after page (the sweep's audit, `verify --all`). */
export async function* listAllHeadless(
  store: CheckpointStore,
): AsyncGenerator<string, void, undefined> {
  for (let cursor: string | undefined; ;) {
    const page = await store.listHeadless({
      limit: 100,
      ...(cursor !== undefined && { cursor }),
    });
    yield* page.runIds;
    if (page.next === undefined) return;
    cursor = page.next;
  }
}
