/**
 * Runs that wait for a time, for the operator specs (CLI, viewer, events): a sleeping run, a paused
 * run with an approval deadline, one the clock denied, one the clock failed. Any store; the specs
 * use the memory one (test code, never shipped).
 */
import {
  Flow,
  ToolDenied,
  ToolRegistry,
  type ApprovalTimeoutAction,
  type CheckpointStore,
  type FlowRunnerOptions,
} from 'agent-adapter';
import { runnerOn, sleep } from './specs';

export interface Nap {
  to: string;
  note?: string;
}

/** A flow whose node mails, sleeps `ms`, then mails again. */
export function napFlow(ms = 3_600_000): Flow<Nap> {
  return new Flow<Nap>('nap')
    .node('remind', async (s, ctx) => {
      await ctx.call('mail', { to: s.to });
      await ctx.sleep(ms);
      return {
        note: await ctx.call<string>('mail', { to: s.to, again: true }),
      };
    })
    .end('remind');
}

/** A flow whose node asks for a refund that needs an approval (a denial becomes its note). */
export function refundFlow(): Flow<Nap> {
  return new Flow<Nap>('refunds')
    .node('decide', async (s, ctx) => ({
      note: await ctx
        .call<string>('refund', { to: s.to })
        .catch((e: unknown) => {
          if (e instanceof ToolDenied) return 'denied';
          throw e;
        }),
    }))
    .end('decide');
}

/** `mail`, and `refund` with an approval deadline of `timeoutMs` (then `onTimeout`). */
export function timeTools(
  ran: string[],
  onTimeout: ApprovalTimeoutAction = 'deny',
  timeoutMs = 3_600_000,
): ToolRegistry {
  return new ToolRegistry()
    .register('mail', (a: { to: string }) => {
      ran.push(`mail ${a.to}`);
      return `mailed ${a.to}`;
    })
    .register(
      'refund',
      (a: { to: string }) => {
        ran.push(`refund ${a.to}`);
        return `refunded ${a.to}`;
      },
      { approval: { timeoutMs, onTimeout } },
    );
}

/**
 * Stores, as `runIds` say: `sleeping` (sleeps an hour), `deadline` (paused, its deadline in an
 * hour, then deny), `timedOut` (the clock denied it), `failed` (the clock failed the run).
 */
export async function timeRuns(
  store: CheckpointStore,
  runIds: {
    sleeping?: string;
    deadline?: string;
    timedOut?: string;
    failed?: string;
  },
  options: Partial<FlowRunnerOptions> = {},
): Promise<{ ran: string[] }> {
  const ran: string[] = [];
  const w = runnerOn(store, timeTools(ran), options);
  if (runIds.sleeping)
    await w.run(napFlow(), { to: 'ann' }, { runId: runIds.sleeping });
  if (runIds.deadline)
    await w.run(refundFlow(), { to: 'bob' }, { runId: runIds.deadline });
  w.close();
  for (const [runId, onTimeout] of [
    [runIds.timedOut, 'deny'],
    [runIds.failed, 'fail'],
  ] as const) {
    if (!runId) continue;
    const quick = runnerOn(store, timeTools(ran, onTimeout, 10), options);
    await quick.run(refundFlow(), { to: 'cy' }, { runId });
    await sleep(25);
    await quick.recover(refundFlow(), runId); // the clock decides
    quick.close();
  }
  return { ran };
}
