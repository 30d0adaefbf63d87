/**
 * Flows the crash workers run besides the tickets flow, shared with the tests (which recover or
 * inspect runs in-process: a flow's digest is its shape, the same in every process).
 */
import { Flow, ToolDenied } from 'agent-adapter';

/** The refunds flow's state. */
export interface Refund {
  amount: number;
  quote?: string;
  note?: string;
}

/** A quote, then a refund that needs approval; a denial is noted instead of failing the run. */
export function refundsFlow(): Flow<Refund> {
  return new Flow<Refund>('refunds')
    .node('decide', async (s, ctx) => ({
      quote: await ctx.call<string>('quote', { amount: s.amount }),
      note: await ctx
        .call<string>('refund', { amount: s.amount })
        .catch((e: unknown) => {
          if (e instanceof ToolDenied) return `not refunded: ${e.message}`;
          throw e;
        }),
    }))
    .end('decide');
}
