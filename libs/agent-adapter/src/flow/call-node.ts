import { FlowError } from '../errors';
import { Messages } from '../errors/messages';

/** Routes return END to finish a branch. @publicApi */
export const END = '__end__';

const CALL = Symbol.for('agent-adapter:call-node');

/** A node that calls one tool and (optionally) stores its result under a state key. @publicApi */
export interface CallNode<S> {
  readonly [CALL]: true;
  readonly tool: string;
  readonly into?: string;
  readonly args: (state: S) => unknown;
}

/**
 * A node that calls `tool` with `args(state)` and, with `into`, writes the result to that key.
 * @publicApi
 */
export function Call<S = never>(
  tool: string,
  options: { args?: (state: S) => unknown; into?: keyof S & string } = {},
): CallNode<S> {
  if (typeof tool !== 'string' || tool === '')
    throw new FlowError(Messages.callTool());
  return {
    [CALL]: true,
    tool,
    ...(options.into !== undefined && { into: options.into }),
    args: options.args ?? (() => ({})),
  };
}

export function isCallNode<S>(value: unknown): value is CallNode<S> {
  return typeof value === 'object' && value !== null && CALL in value;
}
