import { Messages } from '../errors/messages';
import { DurableError } from '../errors';
import { canonicalJson } from './durable/canonical-json';
import type { KeyRing } from './durable/key-ring';
import type { CallIdentity } from './durable/records';
import { toolStorage } from './call-context';

/**
 * The idempotency key of the tool call in progress: the same for this call on every worker and
 * after every recovery, different for every other call. Pass it to any external API that takes
 * one (payments, mail) so a call rerun after a crash is applied once.
 *
 * Derived with HMAC from run id, superstep, node, call index and tool under the run's checkpoint
 * key, so it reveals none of them and cannot be guessed from the run id.
 * @publicApi
 */
export function idempotencyKey(): string {
  const scope = toolStorage.getStore();
  if (!scope) throw new DurableError(Messages.noIdempotencyContext());
  return scope.idempotencyKey;
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
