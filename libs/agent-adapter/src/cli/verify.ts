import { CheckpointStoreCorrupt } from '../errors';
import { corruptMessage } from './corrupt-wording';
import { Messages } from '../errors/messages';
import { compareCallKeys } from '../exec/checkpoints/call-order';
import type {
  CallKey,
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  HistoryPage,
  RunHead,
  RunStatus,
} from '../exec/checkpoints/checkpoint-store';
import { assertNoGaps } from '../flow/runner/run-reader';
import type { KeyRing } from '../exec/durable/key-ring';
import {
  openCall,
  openCheckpoint,
  type Checkpoint,
} from '../exec/durable/records';
import { openHead } from '../exec/durable/head-seal';
import { checkCutSuperstep, type Problem } from './verify-log';

export type { Problem } from './verify-log';

/** The columns of a run's head that its rows must agree with. */
export interface HeadFacts {
  flow: string;
  step: number;
  status: RunStatus;
  segment: number;
  /** Call records the head counts (every segment). */
  calls: number;
  /** The head seal (`RunHead.sealed`): these facts and the run's incarnation, signed. */
  sealed: string;
  /** The key of the last call record (`RunHead.lastCall`), unsealed. */
  lastCall?: CallKey;
}

export interface RunVerification {
  runId: string;
  flow?: string;
  checkpoints: number;
  calls: number;
  problems: Problem[];
}

/**
 * Checks a run's rows with the functions recovery uses: every checkpoint and call record opened
 * against its coordinates (`openCheckpoint`, `openCall`: signature, format, fields), every
 * superstep's call log numbered without gaps per segment (`assertNoGaps`), and the counts recovery
 * relies on (each checkpoint's `logBefore`, the head's call count). Reports every problem it finds
 * instead of stopping at the first. Reads nothing but what it is given.
 */
export function verifyHistory(
  ring: KeyRing,
  runId: string,
  history: HistoryPage,
  head?: HeadFacts,
): Problem[] {
  const problems: Problem[] = [];
  const corrupt = (where: string, error: unknown) => {
    if (!(error instanceof CheckpointStoreCorrupt)) throw error;
    problems.push({ where, detail: corruptMessage(error) });
  };

  const records = [...history.checkpoints].sort((a, b) => a.step - b.step);
  const opened: Checkpoint[] = [];
  records.forEach((record, i) => {
    const where = `checkpoint step ${record.step}`;
    if (record.runId !== runId) {
      problems.push({ where, detail: `belongs to run "${record.runId}"` });
      return;
    }
    if (record.step !== i) {
      problems.push({
        where,
        detail: `checkpoint step ${i} is missing (steps are numbered 0, 1, 2... without gaps)`,
      });
    }
    try {
      opened.push(openCheckpoint(ring, record));
    } catch (error) {
      corrupt(where, error);
    }
  });
  if (records.length === 0)
    problems.push({ where: 'checkpoints', detail: 'the run has none' });
  // One incarnation for the whole run: step 0's (the first that opened, if step 0 did not).
  const incarnation = opened[0]?.incarnation;
  for (const cp of opened) {
    if (cp.incarnation !== incarnation) {
      problems.push({
        where: `checkpoint step ${cp.step}`,
        detail: Messages.corruptIncarnation(
          runId,
          `checkpoint step ${cp.step}`,
          cp.incarnation,
          incarnation ?? Number.NaN,
        ),
      });
    }
  }

  // Call records: opened one by one, then each superstep's log checked for gaps as recovery does.
  const bySuperstep = new Map<number, CallRecord[]>();
  for (const record of history.calls) {
    const where = `call ${record.segment}/${record.superstep}/${record.seq}`;
    if (record.runId !== runId) {
      problems.push({ where, detail: `belongs to run "${record.runId}"` });
      continue;
    }
    try {
      openCall(ring, record, incarnation);
    } catch (error) {
      corrupt(where, error);
    }
    const group = bySuperstep.get(record.superstep) ?? [];
    group.push(record);
    bySuperstep.set(record.superstep, group);
  }
  for (const [superstep, group] of [...bySuperstep].sort(([a], [b]) => a - b)) {
    group.sort((a, b) => a.segment - b.segment || a.seq - b.seq);
    try {
      assertNoGaps(runId, group);
    } catch (error) {
      corrupt(`call log of superstep ${superstep}`, error);
    }
  }

  // The counts: each checkpoint says how many records the supersteps before it made.
  let previous: Checkpoint | undefined;
  for (const cp of opened) {
    const where = `checkpoint step ${cp.step}`;
    const before = history.calls.filter(
      (c) => c.runId === runId && c.superstep < cp.superstep,
    ).length;
    if (cp.logBefore !== before) {
      problems.push({
        where,
        detail: `it counts ${cp.logBefore} call records before superstep ${cp.superstep}, the log has ${before}: records are missing or were added`,
      });
    }
    if (previous && cp.superstep < previous.superstep) {
      problems.push({
        where,
        detail: `superstep ${cp.superstep} after ${previous.superstep}`,
      });
    }
    if (previous && cp.segment < previous.segment) {
      problems.push({
        where,
        detail: `segment ${cp.segment} after ${previous.segment}`,
      });
    }
    previous = cp;
  }
  const latest = opened[opened.length - 1];
  if (latest && latest.step === records[records.length - 1]?.step) {
    const later = history.calls.filter((c) => c.superstep > latest.superstep);
    if (later.length) {
      problems.push({
        where: 'call log',
        detail: `${later.length} call record(s) belong to supersteps after the latest checkpoint's (${latest.superstep})`,
      });
    }
    if (!ring.has(latest.idemKid)) {
      problems.push({
        where: 'key ring',
        detail: Messages.unknownKeyId(latest.idemKid),
      });
    }
  }

  if (head) {
    problems.push(
      ...checkHead(ring, runId, records, history.calls, head, incarnation),
    );
  }
  return problems;
}

function checkHead(
  ring: KeyRing,
  runId: string,
  records: CheckpointRecord[],
  calls: CallRecord[],
  head: HeadFacts,
  incarnation: number | undefined,
): Problem[] {
  const problems: Problem[] = [];
  // The seal first: an edited status or step says so here, whatever the rows say.
  try {
    const sealedIn = openHead(ring, { ...head, runId, updatedAt: 0 });
    if (incarnation !== undefined && sealedIn !== incarnation) {
      problems.push({
        where: 'head',
        detail: Messages.corruptHeadIncarnation(runId, sealedIn, incarnation),
      });
    }
  } catch (error) {
    if (!(error instanceof CheckpointStoreCorrupt)) throw error;
    problems.push({ where: 'head', detail: corruptMessage(error) });
  }
  const last = records[records.length - 1];
  // A row whose columns could not be read is reported already; its columns are placeholders.
  if (last && last.unreadable === undefined) {
    for (const column of ['flow', 'step', 'status', 'segment'] as const) {
      if (last[column] !== head[column]) {
        problems.push({
          where: 'head',
          detail: `its ${column} is ${String(head[column])}, the latest checkpoint's is ${String(last[column])}`,
        });
      }
    }
  }
  if (head.calls !== calls.length) {
    problems.push({
      where: 'head',
      detail: Messages.corruptCount(runId, head.calls, calls.length),
    });
  }
  // Appends are checked against this key, not the rows: raised, it refuses every append; lowered,
  // a second write of a record would not be refused.
  const lastRecord = calls.reduce<CallKey | undefined>(
    (max, c) => (max && compareCallKeys(max, c) >= 0 ? max : c),
    undefined,
  );
  if (!sameKey(head.lastCall, lastRecord)) {
    problems.push({
      where: 'head',
      detail: Messages.corruptLastCall(head.lastCall, lastRecord),
    });
  }
  return problems;
}

function sameKey(a: CallKey | undefined, b: CallKey | undefined): boolean {
  return a === undefined || b === undefined
    ? a === b
    : compareCallKeys(a, b) === 0;
}

/**
 * Verifies one stored run. The head is read before and after the rows: if it moved (a worker
 * saved or logged a call meanwhile), the rows are read again, so a live run is not reported
 * corrupt for a write that landed between two reads.
 */
export async function verifyRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
): Promise<RunVerification | undefined> {
  for (let attempt = 1; ; attempt++) {
    const read = await readTwice(store, runId);
    if (!read) return verifyHeadless(store, ring, runId);
    const { head, history, again } = read;
    if (!sameHead(head, again) && attempt < 5) continue;
    const problems = verifyHistory(ring, runId, history, again);
    const cut = await checkCutSuperstep(store, ring, again, history);
    if (cut === 'moved' && attempt < 5) continue;
    if (cut && cut !== 'moved') problems.push(cut);
    return {
      runId,
      flow: head.flow,
      checkpoints: history.checkpoints.length,
      calls: history.calls.length,
      problems,
    };
  }
}

/**
 * A run with rows but no head (deleted below the store): its rows checked, and the missing head
 * reported. Undefined when the run has no rows either.
 */
async function verifyHeadless(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
): Promise<RunVerification | undefined> {
  const history = await store.history(runId);
  const last = history.checkpoints[history.checkpoints.length - 1];
  if (!last) return undefined;
  return {
    runId,
    flow: last.flow,
    checkpoints: history.checkpoints.length,
    calls: history.calls.length,
    problems: [
      { where: 'head', detail: Messages.corruptHeadMissing(runId, last.step) },
      ...verifyHistory(ring, runId, history),
    ],
  };
}

/**
 * The head, the history, then the head again (`again`): a write that lands between the reads
 * shows as two heads that are not the same. Undefined when the run is not (or no longer) there.
 */
export async function readTwice(
  store: CheckpointStore,
  runId: string,
): Promise<
  { head: RunHead; history: HistoryPage; again: RunHead } | undefined
> {
  const head = await store.head(runId);
  if (!head) return undefined;
  const history = await store.history(runId);
  const again = await store.head(runId);
  return again && { head, history, again };
}

export function sameHead(a: RunHead, b: RunHead): boolean {
  return (
    a.step === b.step &&
    a.calls === b.calls &&
    a.segment === b.segment &&
    a.status === b.status &&
    a.sealed === b.sealed
  );
}
