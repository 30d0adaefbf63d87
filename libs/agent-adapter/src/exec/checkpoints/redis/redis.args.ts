/**
 * The TypeScript side of the Redis store's write scripts (redis.scripts.ts): their ARGV built,
 * their replies read (a refusal as the error the other stores throw).
 */
import {
  CheckpointConflict,
  CheckpointStoreCorrupt,
  FailoverNeedsDecision,
} from '../../../errors';
import { Messages } from '../../../errors/messages';
import type { CallRecord, CheckpointRecord } from '../checkpoint-store';
import { HALF_CREATE_WINDOW } from './redis.index-scripts';
import { LAST_CALL_FIELD } from './redis.layout';

/** A script's reply: `{'ok'}`, or a refusal code and its details. */
export type Reply = Array<string | number | null>;

/** What a save script's ARGV says besides the checkpoint (SAVE_LUA's header); absent = ''. */
export interface SaveArgs {
  token: string;
  ttl: number;
  owner?: string;
  lease?: number;
  expectCalls?: number;
  /** The run's place in the list and its announce time, when its entry was made before. */
  created?: string;
  intent?: string;
  head?: string;
  queue?: string;
  mode: string;
  /**
   * On one server, when the script writes the run's index entry too (made at step 0, due at `due`:
   * its lease, 0 for none; dropped at an end, `queuePrefix` naming its queue's keys).
   */
  index?: { due: number; queuePrefix: string };
}

/** SAVE_LUA's ARGV up to its calls (`pushCalls` appends them): one flat array of strings. */
export function saveArgs(checkpoint: CheckpointRecord, a: SaveArgs): string[] {
  const { step, status, segment, flow, sealed } = checkpoint;
  const some = (v: string | number | undefined) => (v == null ? '' : String(v));
  const index = a.index;
  // prettier-ignore
  return [
    a.token, String(a.ttl), String(step), status, String(segment), flow, sealed,
    JSON.stringify([flow, status, segment]), some(a.owner), some(a.lease), some(a.expectCalls),
    some(a.created), some(a.intent), HALF_CREATE_WINDOW, some(a.head), some(a.queue), a.mode,
    index ? checkpoint.runId : '', some(index?.due), some(index?.queuePrefix),
  ];
}

/**
 * Appends the ARGV tail of save and recordCall: the 1-based index of a call of another run (0:
 * none), the count, then segment, superstep, seq and sealed text per call.
 */
export function pushCalls(
  args: string[],
  runId: string,
  calls: readonly CallRecord[] = [],
): void {
  const at = args.length;
  let foreign = 0;
  args.push('', String(calls.length));
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i]!;
    if (foreign === 0 && c.runId !== runId) foreign = i + 1;
    args.push(String(c.segment), String(c.superstep), String(c.seq), c.sealed);
  }
  args[at] = String(foreign);
}

/** A cluster-enabled server's refusal of keys in two slots in one command (nothing ran). */
export function crossSlot(error: unknown): boolean {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' && /^CROSSSLOT\b/.test(message);
}

/**
 * A write script's refusal as the CheckpointConflict the other stores throw (undefined for `ok`);
 * an unknown code is a plain error: nothing was written, the write may be retried.
 */
export function refusal(
  [code, a, b, c, d, e, f]: Reply,
  runId: string,
  step = 0,
): Error | undefined {
  if (code === 'ok') return undefined;
  if (code === 'failover')
    return new FailoverNeedsDecision(runId, String(a), String(b));
  if (code === 'lastCall')
    return new CheckpointStoreCorrupt(
      Messages.corruptUnreadable(
        runId,
        `its last call key (the run hash's ${LAST_CALL_FIELD} field)`,
        a
          ? `"${String(a)}" is not segment:superstep:seq`
          : 'it is missing, and the run has call records (edited below the store, or written by a development build before this key existed)',
      ),
      runId,
    );
  const num = (v: unknown) => (v == null ? undefined : Number(v));
  const refusals: Record<string, () => string> = {
    step: () => Messages.conflictStep(runId, step, num(a)),
    ended: () => Messages.ended(runId, String(a)),
    moved: () => Messages.logMoved(runId),
    fenced: () => Messages.fenced(runId, Number(a), num(b)),
    order: () =>
      Messages.callOutOfOrder(
        runId,
        { segment: Number(a), superstep: Number(b), seq: Number(c) },
        { segment: Number(d), superstep: Number(e), seq: Number(f) },
      ),
  };
  const message = refusals[String(code)]?.();
  if (message !== undefined) return new CheckpointConflict(message, runId);
  return new Error(Messages.redisRefusedUnknown(runId, String(code)));
}
