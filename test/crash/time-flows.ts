/**
 * The durable-time flows of the crash worker (worker.ts takeover mode, --start and --schedule) and
 * the tests that check them (durable-time.e2e-spec.ts): a module of its own, since importing the
 * worker runs it.
 */
import { Flow, ToolDenied } from 'agent-adapter';

/** A run of the durable-time flows: `show` names it in the ledger; `sleepMs` is nap's sleep. */
export interface Timed {
  show: string;
  sleepMs?: number;
  note?: string;
}

/**
 * Durable time (test/crash/durable-time.e2e-spec.ts): `nap` charges, sleeps `sleepMs` (from the
 * state, so every worker replays the same sleep), then mails; `late-refund` asks for a refund
 * whose approval has a deadline (the clock denies it); `beat` is a schedule's flow, one charge per
 * tick (its `show` is the tick).
 */
export function timeFlows() {
  const nap = new Flow<Timed>('nap')
    .node('nap', async (s, ctx) => {
      await ctx.call<string>('charge_card', { show: s.show });
      await ctx.sleep(s.sleepMs ?? 0);
      return {
        note: await ctx.call<string>('email_tickets', { show: s.show }),
      };
    })
    .end('nap');
  const late = new Flow<Timed>('late-refund')
    .node('decide', async (s, ctx) => ({
      note: await ctx
        .call<string>('refund_late', { show: s.show })
        .catch((e: unknown) => {
          if (e instanceof ToolDenied) return 'denied';
          throw e;
        }),
    }))
    .end('decide');
  const beat = new Flow<Timed>('beat')
    .node('tick', async (s, ctx) => ({
      note: await ctx.call<string>('charge_card', { show: s.show }),
    }))
    .end('tick');
  return { nap, late, beat };
}
