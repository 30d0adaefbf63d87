import { createHash } from 'node:crypto';
import { FlowError, RunSleeping } from '../errors';
import { Messages } from '../errors/messages';
import type { NodeScope } from './call-context';
import { canonical } from './durable/canonical-json';
import type { CallIdentity } from './durable/records';

/**
 * The name a sleep is logged under in the call log: not a valid tool name (`$`), so it never
 * stands for a registered tool.
 */
export const SLEEP_CALL = '$sleep';

/** What a node asked for: a duration from the moment it first slept, or a time. */
export type SleepRequest = { ms: number } | { until: number };

/**
 * A durable sleep in a node. It takes a call index and is logged like a call (`done`, with the wake
 * time it computed) in the checkpoint that puts the run to sleep, so a node run again (after the
 * wake, or a recovery) that reaches the same sleep replays its wake time instead of sleeping
 * afresh. Until that time the node is stopped with `RunSleeping` and the superstep puts the run to
 * sleep at the earliest wake time of its nodes; once it has passed, the sleep returns at once. A
 * time already past never sleeps and logs nothing.
 */
export function sleepInRun(
  scope: NodeScope,
  request: SleepRequest,
): Promise<void> {
  // Settles as a promise either way: a node awaiting it sees the rejection, not a throw.
  return new Promise((resolve) => {
    sleepNow(scope, request);
    resolve();
  });
}

function sleepNow(scope: NodeScope, request: SleepRequest): void {
  const step = scope.step;
  if (step.closed)
    throw new FlowError(Messages.lateCall(scope.node, SLEEP_CALL), step.runId);
  const identity: CallIdentity = {
    node: scope.node,
    index: scope.nextIndex++,
    tool: SLEEP_CALL,
  };
  const argsText = canonical(request, 'sleep');
  const argsHash = createHash('sha256')
    .update(argsText.text)
    .digest('base64url');
  const now = Date.now();
  const prior = step.replay?.lookup(identity);
  const logged =
    prior?.kind === 'done' && prior.argsHash === argsHash
      ? wakeOf(prior.outcome)
      : undefined;
  if (logged !== undefined) step.replayed.push(identity);
  const wakeAt = logged ?? ('ms' in request ? now + request.ms : request.until);
  if (wakeAt <= now) return;
  if (logged === undefined) {
    if (step.log.failure !== undefined) throw step.log.failure;
    // Stored with the checkpoint that puts the run to sleep: a crash before it forgets the sleep,
    // and the node, run again, sleeps from then.
    step.log.finished(step.superstep, {
      ...identity,
      argsHash,
      phase: 'done',
      args: argsText,
      outcome: { ok: true, value: { wakeAt } },
      at: now,
    });
  }
  step.sleeping = Math.min(step.sleeping ?? Infinity, wakeAt);
  throw new RunSleeping(step.runId, scope.node, wakeAt);
}

function wakeOf(outcome: { ok: boolean; value?: unknown }): number | undefined {
  const value = outcome.ok ? outcome.value : undefined;
  const at =
    typeof value === 'object' && value !== null
      ? (value as { wakeAt?: unknown }).wakeAt
      : undefined;
  return typeof at === 'number' && Number.isFinite(at) ? at : undefined;
}

/** Checks what `ctx.sleep` was given. */
export function sleepFor(node: string, ms: unknown): SleepRequest {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0)
    throw new TypeError(Messages.sleepDuration(node, ms));
  return { ms: Math.ceil(ms) };
}

/** Checks what `ctx.sleepUntil` was given. */
export function sleepUntil(node: string, at: unknown): SleepRequest {
  const ms = at instanceof Date ? at.getTime() : at;
  if (typeof ms !== 'number' || !Number.isFinite(ms))
    throw new TypeError(Messages.sleepUntilTime(node, at));
  return { until: Math.ceil(ms) };
}
