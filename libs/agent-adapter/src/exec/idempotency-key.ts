import { NotInRun } from '../errors';
import { canonicalJson } from './durable/canonical-json';
import type { KeyRing } from './durable/key-ring';
import type { CallIdentity } from './durable/records';
import { publishFrom } from './publish';
import {
  currentToolScope,
  type CurrentCall,
  type SuperstepScope,
  type ToolScope,
} from './call-context';

/**
 * The idempotency key of the tool call in progress: the same for this call on every worker and
 * after every recovery, different for every other call. Pass it to any external API that takes
 * one (payments, mail) so a call rerun after a crash is applied once.
 *
 * Derived with HMAC from run id, superstep, node, call index and tool under the run's checkpoint
 * key, so it reveals none of them and cannot be guessed from the run id.
 *
 * Only inside a durable run's tool call: anywhere else (a `@Tool` method called directly, a
 * node's own code) it throws `NotInRun` and never makes a key up. Code that may run outside a run
 * checks `inRun()` and passes its caller's key: `inRun() ? idempotencyKey() : key`.
 * @publicApi
 */
export function idempotencyKey(): string {
  const scope = currentToolScope();
  if (!scope) throw new NotInRun();
  return scope.idempotencyKey;
}

/**
 * Whether the caller runs inside a durable run's tool call, that is whether `idempotencyKey()`
 * and `currentCall()` have a call to answer for. False in a `@Tool` method called directly (a
 * plain method call) and in a node's own code.
 * @publicApi
 */
export function inRun(): boolean {
  return currentToolScope() !== undefined;
}

/**
 * The tool call in progress (run id, superstep, node, call index, tool; a frozen snapshot, the
 * same on a rerun after a recovery), or undefined outside a durable run's tool call.
 * @publicApi
 */
export function currentCall(): CurrentCall | undefined {
  return currentToolScope()?.call;
}

/** The scope a tool runs in; its key is derived when the tool first asks (most never do). */
export function toolScopeFor(
  step: SuperstepScope,
  tool: string,
  id: CallIdentity,
): ToolScope {
  const { runId, superstep } = step;
  const { node, index } = id;
  const call = Object.freeze({ runId, superstep, node, index, tool: id.tool });
  let key: string | undefined;
  return {
    runId,
    tool,
    identity: step.identity,
    call,
    publish: (data) => publishFrom(step, node, index, data),
    get idempotencyKey() {
      return (key ??= idempotencyKeyOf(step.ring, step, call));
    },
  };
}

/**
 * The idempotency key of a call, from where it was made (`call`: run id, superstep, node, index,
 * tool) and what its run's checkpoint fixes (`run`: the key id and the incarnation). The executor
 * hands this to the tool (`idempotencyKey()`); operators' reads (`runs inspect`, the viewer,
 * `FlowRunner.get`) derive it from the sealed records with this same function, so what they show
 * is exactly what a payment or mail provider was given.
 */
export function idempotencyKeyOf(
  ring: KeyRing,
  run: { readonly idemKid: string; readonly incarnation: number },
  call: Readonly<CallIdentity> & {
    readonly runId: string;
    readonly superstep: number;
  },
): string {
  return deriveIdempotencyKey(
    ring,
    run.idemKid,
    call.runId,
    run.incarnation,
    call.superstep,
    { node: call.node, index: call.index, tool: call.tool },
  );
}

export function deriveIdempotencyKey(
  ring: KeyRing,
  kid: string,
  runId: string,
  incarnation: number,
  superstep: number,
  id: CallIdentity,
  purpose = 'agent-adapter idempotency',
): string {
  return ring
    .get(kid)
    .mac.digest(
      canonicalJson([
        purpose,
        runId,
        incarnation,
        superstep,
        id.node,
        id.index,
        id.tool,
      ]),
    );
}
