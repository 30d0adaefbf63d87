import { StreamEntriesDropped } from '../../errors';
import { UNFINISHED } from '../../exec/checkpoints/checkpoint-store';
import type { RunIdentity } from '../../exec/durable/records';
import { openEntry, type StreamEntry } from '../../exec/durable/stream-entries';
import { checkRunId } from '../run-id';
import type { StreamBell } from '../../exec/stream-bell';
import { integerOption } from './flow-runner.options';
import { checkOwnRun, type RunSources } from './run-checks';
import { openLatest, readHeadAndLatest } from './run-reader';

/** How `FlowRunner.stream` reads a run's stream. @publicApi */
export interface StreamReadOptions {
  /** The first offset wanted: 0 for the whole stream, the last offset read + 1 to go on. @default 0 */
  from?: number;
  /** Who reads: checked against the run's identity, as for `get`. */
  ctx?: RunIdentity;
  /** Ends the iteration (without an error) when aborted: a client that went away. */
  signal?: AbortSignal;
  /**
   * Wait for new entries until the run ends (done or failed; a paused or sleeping run has not).
   * False: stop at the last entry stored now.
   * @default true
   */
  follow?: boolean;
  /**
   * How often to look for new entries another process stored (ms, at least 10). Entries stored in
   * this process are read at once.
   * @default 250
   */
  pollMs?: number;
}

const PAGE = 100;

export interface StreamSettings {
  from: number;
  pollMs: number;
  follow: boolean;
}

/** The options checked before the first read: `DurableSetupError` naming a bad one. */
export function streamSettings(options: StreamReadOptions): StreamSettings {
  const names = { owner: 'FlowRunner.stream' };
  return {
    from: integerOption('from', options.from, 0, 0, names),
    pollMs: integerOption('pollMs', options.pollMs, 250, 10, names),
    follow: options.follow !== false,
  };
}

export type { StreamEntry };

/**
 * Checks the id and the options now (a `TypeError`, a `DurableSetupError` naming the option), then
 * reads the run's stream (`readRunStream`) as the caller iterates.
 */
export function openRunStream(
  sources: RunSources,
  bell: StreamBell,
  flow: { readonly name: string },
  runId: string,
  options: StreamReadOptions,
): AsyncGenerator<StreamEntry, void, undefined> {
  checkRunId(runId);
  const settings = streamSettings(options);
  return readRunStream(sources, bell, flow.name, runId, options, settings);
}

/**
 * A run's stream entries in order from `from`, each verified, each once: pages of the store's
 * entries, then (following) a wait for more until the run has ended. The head is read before each
 * page: a superstep's entries are stored before its checkpoint, so once the head says the run has
 * ended, the page read after it holds the rest.
 */
async function* readRunStream(
  sources: RunSources,
  bell: StreamBell,
  flow: string,
  runId: string,
  options: StreamReadOptions,
  settings: StreamSettings,
): AsyncGenerator<StreamEntry, void, undefined> {
  const { store, ring } = sources;
  const { head, record } = await readHeadAndLatest(store, runId);
  const cp = openLatest(ring, head, record);
  // Identity before anything else: a stranger learns nothing of the run, not even its flow.
  checkOwnRun(cp, runId, flow, options.ctx);
  const { signal } = options;
  let { from } = settings;
  let ended = !UNFINISHED.includes(head.status);
  for (let first = true; !signal?.aborted; first = false) {
    if (!first && !ended) {
      const status = (await store.head(runId))?.status;
      ended = status === undefined || !UNFINISHED.includes(status);
    }
    const page = await store.readStream(runId, { from, limit: PAGE });
    if (page[0] && page[0].offset > from)
      throw new StreamEntriesDropped(runId, from, page[0].offset);
    for (const record of page) {
      yield openEntry(ring, record, cp.incarnation);
      from = record.offset + 1;
    }
    if (page.length === PAGE) continue;
    if (ended || !settings.follow) return;
    // The reader held the entries for a while: the run may have ended meanwhile (its bell rang
    // while nobody waited), so look again before waiting.
    if (page.length > 0) continue;
    await bell.wait(runId, settings.pollMs, signal);
  }
}
