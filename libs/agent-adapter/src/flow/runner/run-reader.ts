import {
  CheckpointConflict,
  CheckpointKeyError,
  CheckpointNotFound,
  CheckpointStoreCorrupt,
} from '../../errors';
import { Messages } from '../../errors/messages';
import type {
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  RunHead,
} from '../../exec/checkpoints/checkpoint-store';
import { openHead } from '../../exec/durable/head-seal';
import type { KeyRing } from '../../exec/durable/key-ring';
import {
  openCall,
  openCheckpoint,
  type Call,
  type Checkpoint,
} from '../../exec/durable/records';
import { ReplayBook } from '../../exec/durable/replay';

/**
 * Reads a run as recovery must see it before it writes anything: the head, the latest checkpoint
 * and the call log of the superstep that checkpoint opened, each checked (seals, numbering, counts,
 * segments). The runner, the CLI's inspector and verifier, and the viewer all read through here,
 * so they agree on what is corrupt and what is a race.
 */

/** The head and the latest checkpoint row, read in that order (the head's count is what a claim insists on). */
export async function readHeadAndLatest(
  store: CheckpointStore,
  runId: string,
): Promise<{ head: RunHead; record: CheckpointRecord }> {
  const head = await store.head(runId);
  const record = await store.latest(runId);
  if (head && record) return { head, record };
  if (record)
    throw new CheckpointStoreCorrupt(
      Messages.corruptHeadMissing(runId, record.step),
      runId,
    );
  // A head without checkpoints: deleted between the two reads, or its rows were.
  if (head && (await store.head(runId))) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptLatestMissing(runId, head.step, undefined),
      runId,
    );
  }
  // Nothing under the head's key: the run does not exist, unless its checkpoints are still there
  // (a head deleted below the store; on Redis, where the latest row is found through the head).
  const { checkpoints } = await store.history(runId);
  const last = checkpoints[checkpoints.length - 1];
  if (last)
    throw new CheckpointStoreCorrupt(
      Messages.corruptHeadMissing(runId, last.step),
      runId,
    );
  throw new CheckpointNotFound(runId);
}

/**
 * Opens the latest checkpoint against its head, both verified. The head is read first and every
 * save writes both at once, so a row ahead of the head is a worker saving meanwhile
 * (`CheckpointConflict`); a row behind the sealed head is a deleted checkpoint, and a bad seal, a
 * segment or incarnation other than the head's is `CheckpointStoreCorrupt`.
 */
export function openLatest(
  ring: KeyRing,
  head: RunHead,
  record: CheckpointRecord,
): Checkpoint {
  const incarnation = openHead(ring, head);
  if (record.step > head.step) {
    throw new CheckpointConflict(
      Messages.conflictStep(head.runId, head.step + 1, record.step),
      head.runId,
    );
  }
  if (record.step < head.step) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptLatestMissing(head.runId, head.step, record.step),
      head.runId,
    );
  }
  const cp = openCheckpoint(ring, record);
  assertHeadSegment(head, record);
  if (cp.incarnation !== incarnation) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptHeadIncarnation(head.runId, incarnation, cp.incarnation),
      head.runId,
    );
  }
  return cp;
}

/**
 * The latest checkpoint opened against its head (`openLatest`), for readers that only look: a save
 * that lands between the two reads is read again rather than reported.
 */
export async function readVerified(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
): Promise<{ head: RunHead; cp: Checkpoint }> {
  for (let attempt = 1; ; attempt++) {
    const { head, record } = await readHeadAndLatest(store, runId);
    try {
      return { head, cp: openLatest(ring, head, record) };
    } catch (error) {
      if (!(error instanceof CheckpointConflict) || attempt >= 5) throw error;
    }
  }
}

/**
 * A run `listHeadless` found, read again by id: the corruption recovery would report, with the
 * flow its latest checkpoint names when that checkpoint's seal holds (a forged row names no flow,
 * so every flow's sweep reports it). Undefined when it has a head by now or no rows at all.
 */
export async function readHeadless(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
): Promise<{ flow?: string; problem: CheckpointStoreCorrupt } | undefined> {
  if (await store.head(runId)) return undefined;
  const { checkpoints } = await store.history(runId);
  const last = checkpoints[checkpoints.length - 1];
  if (!last) return undefined;
  const problem = new CheckpointStoreCorrupt(
    Messages.corruptHeadMissing(runId, last.step),
    runId,
  );
  try {
    return { flow: openCheckpoint(ring, last).flow, problem };
  } catch (error) {
    if (error instanceof CheckpointStoreCorrupt) return { problem };
    throw error;
  }
}

/** The error a head's seal gives (`CheckpointStoreCorrupt`), or undefined when it holds. */
export function headProblem(
  ring: KeyRing,
  head: RunHead,
): CheckpointStoreCorrupt | undefined {
  try {
    openHead(ring, head);
    return undefined;
  } catch (error) {
    if (error instanceof CheckpointStoreCorrupt) return error;
    throw error;
  }
}

/** The cut superstep's call log, read and checked (see `readCutSuperstep`). */
export interface CutSuperstep {
  /** The rows as stored, in (segment, seq) order. */
  records: CallRecord[];
  /** The rows that opened. */
  calls: Call[];
  book: ReplayBook;
}

/**
 * Reads the call log of the superstep `cp` opened and checks it: the idempotency key id is held,
 * no gap, every seal (against the run's incarnation), and the head's count. Each problem goes to
 * `report`, which throws by default (recovery); the inspector collects instead. A count that grew
 * meanwhile is the run moving: `CheckpointConflict`, always thrown.
 */
export async function readCutSuperstep(
  store: CheckpointStore,
  ring: KeyRing,
  cp: Checkpoint,
  head: RunHead,
  report: (problem: CheckpointStoreCorrupt | CheckpointKeyError) => void = (
    problem,
  ) => {
    throw problem;
  },
): Promise<CutSuperstep> {
  const { runId } = cp;
  // The run's idempotency keys need the key they were derived with, from the first call on.
  if (!ring.has(cp.idemKid))
    report(new CheckpointKeyError(Messages.unknownKeyId(cp.idemKid)));
  const records = await store.calls(runId, cp.superstep);
  collect(report, () => assertNoGaps(runId, records));
  const calls: Call[] = [];
  for (const record of records) {
    collect(report, () => calls.push(openCall(ring, record, cp.incarnation)));
  }
  // The head counts every call record; all but this superstep's are counted in the checkpoint.
  // A record lost from the end of the log (eviction, a partial restore) shows up here.
  try {
    await assertLogCount(store, head, cp.logBefore + records.length);
  } catch (error) {
    if (!(error instanceof CheckpointStoreCorrupt)) throw error;
    report(error);
  }
  return { records, calls, book: new ReplayBook(calls, cp.resolutions) };
}

function collect(
  report: (problem: CheckpointStoreCorrupt) => void,
  check: () => unknown,
): void {
  try {
    check();
  } catch (error) {
    if (!(error instanceof CheckpointStoreCorrupt)) throw error;
    report(error);
  }
}

/**
 * Checks that, per segment, the records are numbered 1, 2, 3... with nothing missing or repeated.
 * `records` must be ordered by (segment, seq), as `CheckpointStore.calls` returns them.
 */
export function assertNoGaps(
  runId: string,
  records: ReadonlyArray<{ segment: number; seq: number }>,
): void {
  let segment = Number.NaN;
  let expected = 1;
  for (const r of records) {
    if (r.segment !== segment) {
      segment = r.segment;
      expected = 1;
    }
    if (r.seq !== expected) {
      throw new CheckpointStoreCorrupt(
        Messages.corruptGap(runId, r.segment, expected, r.seq),
        runId,
      );
    }
    expected++;
  }
}

/**
 * The latest checkpoint's segment must be the head's: segments of another incarnation are another
 * range, so a checkpoint of an earlier run with this id copied on top is `CheckpointStoreCorrupt`
 * without reading anything more (recovery reads the head anyway). Call after checking the steps
 * agree.
 */
export function assertHeadSegment(
  head: RunHead,
  record: Pick<CheckpointRecord, 'step' | 'segment'>,
): void {
  if (record.segment !== head.segment) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptHeadSegment(
        head.runId,
        record.step,
        record.segment,
        head.segment,
      ),
      head.runId,
    );
  }
}

/**
 * Recovery's count check, before anything is written: the head counts every call record of the run;
 * `accounted` is what the latest checkpoint counts before its superstep (`logBefore`) plus the
 * records a read of that superstep found (`CheckpointStore.calls`, through the store's call index).
 * More than the head counts: the log grew since the head was read, its worker is alive
 * (`CheckpointConflict`). Fewer: records or index entries are missing (`CheckpointStoreCorrupt`),
 * unless the head moved on meanwhile (read again). The reads are not one snapshot.
 */
export async function assertLogCount(
  store: CheckpointStore,
  head: RunHead,
  accounted: number,
): Promise<void> {
  const { runId } = head;
  if (accounted > head.calls)
    throw new CheckpointConflict(Messages.logMoved(runId), runId);
  if (accounted < head.calls) {
    const again = await store.head(runId);
    if (again?.calls !== head.calls || again.step !== head.step) {
      throw new CheckpointConflict(Messages.logMoved(runId), runId);
    }
    throw new CheckpointStoreCorrupt(
      Messages.corruptCount(runId, head.calls, accounted),
      runId,
    );
  }
}
