import { asError, NotInRun } from '../errors';
import { Messages } from '../errors/messages';
import type { Json } from './durable/canonical-json';
import {
  currentNodeScope,
  currentToolScope,
  type SuperstepScope,
} from './call-context';

/**
 * Publishes an entry to the stream of the run the caller works for: from a node's code (as
 * `ctx.publish`) or from a tool a node called (tool progress). Resolves once the entry is stored;
 * rejects with `NotInRun` outside a durable run. See `NodeContext.publish`.
 * @publicApi
 */
export function publish(data: Json): Promise<void> {
  const tool = currentToolScope();
  if (tool) return tool.publish(data);
  const node = currentNodeScope();
  if (!node) return Promise.reject(new NotInRun(Messages.publishOutsideRun()));
  return publishFrom(node.step, node.node, undefined, data);
}

/**
 * `ctx.publish` and `publish()`: the entry's place is the node's, or (`call`, its index) the tool
 * call's. Never throws: a refusal is the promise's.
 */
export function publishFrom(
  step: SuperstepScope,
  node: string,
  call: number | undefined,
  data: unknown,
): Promise<void> {
  try {
    if (step.closed) throw new TypeError(Messages.publishAfterSuperstep(node));
    return step.stream.publish(node, call, data);
  } catch (error) {
    return Promise.reject(asError(error));
  }
}
