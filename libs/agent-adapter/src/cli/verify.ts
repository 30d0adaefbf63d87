import { CheckpointStoreCorrupt } from '../errors';
import { CliMessages } from './cli.messages';
import { corruptMessage } from './corrupt-wording';
import { Messages } from '../errors/messages';
import type {
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  HistoryPage,
  RunHead,
  RunStatus,
} from '../exec/checkpoints/checkpoint-store';
import { assertNoGaps } from '../flow/runner/run-reader';
import { canonicalJson } from '../exec/durable/canonical-json';
import type { KeyRing } from '../exec/durable/key-ring';
import {
  openCall,
  openCheckpoint,
  type Checkpoint,
} from '../exec/durable/records';
import { open, seal } from '../exec/durable/seal';
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

  if (head) problems.push(...checkHead(runId, records, history.calls, head));
  return problems;
}

function checkHead(
  runId: string,
  records: CheckpointRecord[],
  calls: CallRecord[],
  head: HeadFacts,
): Problem[] {
  const problems: Problem[] = [];
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
  return problems;
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
    if (!read) return undefined;
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
 * The head, the history, then the head again (`again`): a write that lands between the reads
 * shows as two heads that are not the same. Undefined when the run is not (or no longer) there.
 */
async function readTwice(
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

function sameHead(a: RunHead, b: RunHead): boolean {
  return (
    a.step === b.step &&
    a.calls === b.calls &&
    a.segment === b.segment &&
    a.status === b.status
  );
}

export const BUNDLE_FORMAT = 'agent-adapter.bundle/1';

/** Everything of one run, for audit: its rows as stored, and a signature over all of it. */
export interface AuditBundle {
  format: typeof BUNDLE_FORMAT;
  runId: string;
  flow: string;
  exportedAt: string;
  head: HeadFacts & { updatedAt: number };
  checkpoints: CheckpointRecord[];
  calls: CallRecord[];
  /** `aa2.<key id>.<HMAC>` over the canonical JSON of every other field, for this run id. */
  signature: string;
}

/** Reads a run into a signed bundle (the rows as stored: each keeps its own seal). */
export async function exportRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
  now: Date = new Date(),
): Promise<AuditBundle | undefined> {
  for (let attempt = 1; ; attempt++) {
    const read = await readTwice(store, runId);
    if (!read) return undefined;
    const { head, history, again } = read;
    if (!sameHead(head, again) && attempt < 5) continue;
    const content = {
      format: BUNDLE_FORMAT,
      runId,
      flow: again.flow,
      exportedAt: now.toISOString(),
      head: {
        flow: again.flow,
        step: again.step,
        status: again.status,
        segment: again.segment,
        calls: again.calls,
        updatedAt: again.updatedAt,
      },
      checkpoints: history.checkpoints.map(
        ({ runId, step, flow, status, segment, sealed }) => ({
          runId,
          step,
          flow,
          status,
          segment,
          sealed,
        }),
      ),
      calls: history.calls.map(
        ({ runId, segment, seq, superstep, sealed }) => ({
          runId,
          segment,
          seq,
          superstep,
          sealed,
        }),
      ),
    } satisfies Omit<AuditBundle, 'signature'>;
    // The bundle seal is the library's seal over the canonical bundle, kept without its body.
    const sealed = seal(ring, bundleCoords(runId), content);
    return { ...content, signature: sealed.split('.', 3).join('.') };
  }
}

export interface BundleVerification extends RunVerification {
  /** Whether the bundle's own signature holds (its rows were not added, removed or edited). */
  signed: boolean;
}

/**
 * Checks a bundle offline: its signature (with the key ring), then every row as `verifyHistory`
 * does, against the head facts the bundle carries.
 */
export function verifyBundle(
  ring: KeyRing,
  bundle: unknown,
): BundleVerification {
  if (!isObject(bundle) || bundle.format !== BUNDLE_FORMAT) {
    throw new TypeError(CliMessages.notABundle(BUNDLE_FORMAT));
  }
  const { signature, ...content } = bundle as unknown as AuditBundle;
  const runId = String(content.runId);
  const problems: Problem[] = [];
  let signed = false;
  if (typeof signature !== 'string' || signature.split('.').length !== 3) {
    problems.push({ where: 'bundle', detail: 'it has no signature' });
  } else {
    let body: string | undefined;
    try {
      body = canonicalJson(content);
    } catch (error) {
      problems.push({ where: 'bundle', detail: String(error) });
    }
    if (body !== undefined) {
      const opened = open(ring, bundleCoords(runId), `${signature}.${body}`);
      signed = opened.ok;
      if (!opened.ok) {
        problems.push({
          where: 'bundle',
          detail: `the bundle does not match its signature (${opened.detail}): rows were added, removed or edited after export, or it was signed with another key`,
        });
      }
    }
  }
  const history: HistoryPage = {
    checkpoints: Array.isArray(content.checkpoints) ? content.checkpoints : [],
    calls: Array.isArray(content.calls) ? content.calls : [],
  };
  problems.push(
    ...verifyHistory(
      ring,
      runId,
      history,
      isObject(content.head) ? content.head : undefined,
    ),
  );
  return {
    runId,
    flow: typeof content.flow === 'string' ? content.flow : undefined,
    checkpoints: history.checkpoints.length,
    calls: history.calls.length,
    problems,
    signed,
  };
}

function bundleCoords(runId: string) {
  return { kind: 'bundle' as const, runId };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
