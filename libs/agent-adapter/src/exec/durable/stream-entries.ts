import { CheckpointStoreCorrupt } from '../../errors';
import { Messages } from '../../errors/messages';
import type { StreamRecord } from '../checkpoints/checkpoint-store';
import type { Json } from './canonical-json';
import type { KeyRing } from './key-ring';
import { seal } from './seal';
import { hide, isObject, openBody } from './sealed-body';

/**
 * An entry of a run's stream as a reader gets it: what a node or a tool published, where, when.
 * @publicApi
 */
export interface StreamEntry {
  /** Its number in the run's stream (0, 1, 2...): read on from `offset + 1` to continue. */
  readonly offset: number;
  /** The superstep that published it. */
  readonly superstep: number;
  /** The node that published it (from a tool of the node too). */
  readonly node: string;
  readonly data: Json;
  /** Epoch ms it was published. */
  readonly at: number;
}

type EntryColumns = Pick<StreamRecord, 'runId' | 'superstep' | 'place'>;

/** What an entry holds that is encrypted at rest. */
const ENTRY_SECRETS = ['data'] as const;

function entryCoords(c: EntryColumns) {
  // Keys in canonical (sorted) order. The offset is the store's, so it is not signed: a reader
  // checks that one superstep's places keep their order (`openEntry`'s callers do not rely on more).
  return {
    kind: 'entry' as const,
    place: c.place,
    runId: c.runId,
    superstep: c.superstep,
  };
}

/** Seals an entry under its columns and the run's incarnation (a copy into a later run fails). */
export function sealEntry(
  ring: KeyRing,
  columns: EntryColumns,
  incarnation: number,
  content: { node: string; data: Json; at: number },
): Omit<StreamRecord, 'offset'> {
  const body = hide(ring, { ...content, incarnation }, ENTRY_SECRETS);
  return { ...columns, sealed: seal(ring, entryCoords(columns), body) };
}

/**
 * A stored entry, verified; `CheckpointStoreCorrupt` when it does not verify, or (given the run's
 * incarnation) was sealed in another incarnation of the run id.
 */
export function openEntry(
  ring: KeyRing,
  record: StreamRecord,
  incarnation?: number,
): StreamEntry {
  const what = `stream entry ${record.offset}`;
  const c = openBody<Record<string, unknown>>(
    ring,
    entryCoords(record),
    record,
    what,
    ENTRY_SECRETS,
  );
  if (
    !isObject(c) ||
    typeof c.node !== 'string' ||
    typeof c.at !== 'number' ||
    !Number.isInteger(c.incarnation) ||
    !('data' in c)
  ) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptUnreadable(record.runId, what, 'missing fields'),
      record.runId,
    );
  }
  if (incarnation !== undefined && c.incarnation !== incarnation) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptIncarnation(
        record.runId,
        what,
        c.incarnation as number,
        incarnation,
      ),
      record.runId,
    );
  }
  return {
    offset: record.offset,
    superstep: record.superstep,
    node: c.node,
    data: c.data as Json,
    at: c.at,
  };
}
