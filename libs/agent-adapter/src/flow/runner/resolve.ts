import { CheckpointConflict } from '../../errors';
import { Messages } from '../../errors/messages';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import { assertJson, type Json } from '../../exec/durable/canonical-json';
import type { KeyRing } from '../../exec/durable/key-ring';
import type { Checkpoint, Resolution } from '../../exec/durable/records';
import type { SegmentOwner } from '../../exec/durable/segment-write';
import { SegmentWriter } from '../../exec/durable/segment-writer';
import { callIdOf } from './in-doubt';
import { readCutSuperstep, readVerified } from './run-reader';
import { resolveCheckpoint } from './run-transitions';

/**
 * What one call in doubt really did, as an operator (or code) found it at the call's system: it
 * ran, with what it returned (`result`, JSON) or the error it returned; or it did not run. `call`
 * is the call's id, `node#index`, as `runs inspect`, the viewer and `get()` show it. @publicApi
 */
export type CallFinding =
  | { call: string; ran: true; result?: Json }
  | { call: string; ran: true; error: { name: string; message: string } }
  | { call: string; ran: false };

/** @publicApi */
export interface ResolveRequest {
  /** One finding per call resolved; calls in doubt left out stay in doubt. */
  calls: CallFinding[];
  /** Who decided (sealed with the decision). */
  by?: string;
  reason?: string;
}

/**
 * Stores what calls in doubt really did, for recovery to spend: reads the run as recovery does (its
 * verified head and latest checkpoint, the cut superstep's call log), checks that every finding
 * names a call in doubt there, then writes the resolve checkpoint (a new segment) with the head's
 * call count as the compare-and-set, so one decision wins over a racing decision, recovery or a
 * worker still alive. Runs nothing: the next recovery replays a call that ran with its outcome and
 * runs one that did not. Bad input is a `TypeError` naming it, with nothing written.
 */
export async function storeResolution(
  on: { readonly store: CheckpointStore; readonly ring: KeyRing },
  runId: string,
  request: ResolveRequest,
  writer: SegmentOwner,
  /** Checks the requester may decide for this run (the runner's access rule), before anything. */
  access: (cp: Checkpoint) => void = () => undefined,
): Promise<Checkpoint> {
  const findings = checkedFindings(runId, request);
  const { head, cp } = await readVerified(on.store, on.ring, runId);
  access(cp);
  if (cp.status === 'done' || cp.status === 'failed')
    throw new CheckpointConflict(Messages.ended(runId, cp.status), runId);
  const { book } = await readCutSuperstep(on.store, on.ring, cp, head);
  const inDoubt = new Map(book.inDoubt().map((p) => [callIdOf(p.call), p]));
  const at = Date.now();
  const resolutions = findings.map((f): Omit<Resolution, 'step'> => {
    const prior = inDoubt.get(f.call);
    if (!prior) {
      throw new TypeError(
        Messages.notInDoubt(
          runId,
          f.call,
          [...inDoubt].map(([id, p]) => `${id} (${p.call.tool})`),
        ),
      );
    }
    const { node, index, tool, segment, seq } = prior.call;
    return {
      node,
      index,
      tool,
      argsHash: prior.argsHash,
      segment,
      seq,
      ran: f.ran,
      ...(f.ran && {
        outcome:
          'error' in f
            ? {
                ok: false,
                error: { name: f.error.name, message: f.error.message },
              }
            : { ok: true, ...(f.result !== undefined && { value: f.result }) },
      }),
      ...(request.by !== undefined && { by: request.by }),
      ...(request.reason !== undefined && { reason: request.reason }),
      at,
    };
  });
  const next = resolveCheckpoint(cp, resolutions);
  await SegmentWriter.writeAlone(on.store, on.ring, next, writer, {
    expectCalls: head.calls,
  });
  return next;
}

/** The request's findings, checked before anything is read: shape, JSON results, no repeats. */
function checkedFindings(
  runId: string,
  request: ResolveRequest,
): CallFinding[] {
  const bad = (why: string) =>
    new TypeError(Messages.badResolution(runId, why));
  if (typeof request !== 'object' || request === null)
    throw bad('give { calls: [...], by, reason }');
  const { calls, by, reason } = request;
  if (!Array.isArray(calls) || calls.length === 0)
    throw bad(
      'calls must be a non-empty array of { call, ran, result | error }',
    );
  for (const [name, value] of [
    ['by', by],
    ['reason', reason],
  ] as const) {
    if (
      value !== undefined &&
      (typeof value !== 'string' || value.length > 500)
    )
      throw bad(`${name} must be a string of at most 500 characters`);
  }
  const seen = new Set<string>();
  for (const f of calls as unknown[]) {
    if (typeof f !== 'object' || f === null)
      throw bad('each finding must be an object');
    const { call, ran } = f as Record<string, unknown>;
    if (typeof call !== 'string' || !/^[^#]+#\d+$/.test(call))
      throw bad(
        `call must be a call id "node#index", got ${JSON.stringify(call)}`,
      );
    if (seen.has(call)) throw bad(`call ${call} is given twice`);
    seen.add(call);
    if (typeof ran !== 'boolean')
      throw bad(`call ${call}: ran must be true or false`);
    const has = (key: string) => key in f;
    if (!ran && (has('result') || has('error')))
      throw bad(`call ${call}: a call that did not run has no result or error`);
    if (ran && has('result') && has('error'))
      throw bad(`call ${call}: give its result or its error, not both`);
    if (ran && has('error')) {
      const e = (f as { error: unknown }).error as Record<
        string,
        unknown
      > | null;
      if (typeof e?.name !== 'string' || typeof e.message !== 'string')
        throw bad(`call ${call}: error must be { name, message } (strings)`);
    }
    if (ran && has('result')) {
      try {
        assertJson((f as { result: unknown }).result, '$.result');
      } catch (error) {
        throw bad(
          `call ${call}: its result is not JSON a tool could return (${(error as Error).message})`,
        );
      }
    }
  }
  return calls;
}
