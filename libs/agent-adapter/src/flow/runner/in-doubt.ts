import { CheckpointConflict } from '../../errors';
import type {
  CheckpointStore,
  RunHead,
} from '../../exec/checkpoints/checkpoint-store';
import type { Json } from '../../exec/durable/canonical-json';
import type { KeyRing } from '../../exec/durable/key-ring';
import type { CallIdentity, Checkpoint } from '../../exec/durable/records';
import type { ToolRegistry } from '../../exec/tool.registry';
import { idempotencyKeyOf } from '../../exec/idempotency-key';
import type { InDoubtCall, NeedsDecision } from '../flow.interfaces';
import { readCutSuperstep, type CutSuperstep } from './run-reader';

/**
 * What an operator must check for each call in doubt, from recovery's own read of the cut
 * superstep (`readCutSuperstep`, `ReplayBook`): the runner's `get`, `runs inspect` and the viewer
 * all describe calls in doubt through here.
 */

/** How a call is named to an operator: `node#index` (unique within its superstep). */
export function callIdOf(id: Pick<CallIdentity, 'node' | 'index'>): string {
  return `${id.node}#${id.index}`;
}

/**
 * Every call in doubt of the cut superstep `cut` of `cp`, idempotent or not, with its arguments (from
 * its `started` record), when it started, and the idempotency key the tool was given (absent when
 * the ring does not hold the run's key id).
 */
export function describeInDoubt(
  ring: KeyRing,
  cp: Pick<Checkpoint, 'idemKid' | 'incarnation'>,
  cut: Pick<CutSuperstep, 'calls' | 'book'>,
): InDoubtCall[] {
  const keyed = ring.has(cp.idemKid);
  return cut.book.inDoubt().map(({ call, why }): InDoubtCall => {
    // The `started` record holds the arguments; a later unrecordable/approving one may not.
    const started = cut.calls.find(
      (c) =>
        c.phase === 'started' &&
        c.node === call.node &&
        c.index === call.index &&
        c.tool === call.tool &&
        c.argsHash === call.argsHash,
    );
    const args: Json | undefined = call.args ?? started?.args;
    return {
      callId: callIdOf(call),
      node: call.node,
      index: call.index,
      tool: call.tool,
      superstep: call.superstep,
      segment: call.segment,
      seq: call.seq,
      why,
      ...(call.attempt !== undefined && { attempt: call.attempt }),
      ...(args !== undefined && { args }),
      ...(keyed && { idempotencyKey: idempotencyKeyOf(ring, cp, call) }),
      startedAt: (started ?? call).at,
      at: call.at,
    };
  });
}

/**
 * Whether a running run needs an operator's decision now: its owner's lease has expired (or it has
 * no owner alive: `held` says), and the cut superstep has calls in doubt of tools that are not
 * idempotent, so a recovery stops (or stopped) with `RecoveryNeedsDecision`. A run whose worker is
 * alive, mid-call, does not: `held` answers for it, and a run whose log grew while this read is
 * alive.
 * Writes nothing.
 */
export async function needsDecision(
  on: {
    readonly store: CheckpointStore;
    readonly ring: KeyRing;
    readonly registry: ToolRegistry;
  },
  /** The latest checkpoint and its head, read and verified together (`readVerified`). */
  { cp, head }: { cp: Checkpoint; head: RunHead },
  held: (head: RunHead, now: number) => unknown,
  now = Date.now(),
): Promise<NeedsDecision | undefined> {
  if (cp.status !== 'running') return undefined;
  if (held(head, now)) return undefined;
  let cut: CutSuperstep;
  try {
    cut = await readCutSuperstep(on.store, on.ring, cp, head);
  } catch (error) {
    if (error instanceof CheckpointConflict) return undefined; // the log grew: alive
    throw error;
  }
  const calls = describeInDoubt(on.ring, cp, cut).filter(
    (c) => !on.registry.get(c.tool)?.idempotent,
  );
  const failover = await on.store.failover(cp.runId);
  if (!calls.length && !failover) return undefined;
  return {
    calls,
    ...(failover && { failover }),
    ...(head.owner !== undefined && { owner: head.owner }),
    ...(head.leaseExpiresAt !== undefined && {
      leaseExpiresAt: head.leaseExpiresAt,
    }),
  };
}
