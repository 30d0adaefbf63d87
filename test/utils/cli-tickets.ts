/**
 * The operator commands' specs (`cli/*.spec.ts`) share this tickets run: hold (idempotent) → pay →
 * send, on the memory store or any other, with a worker that can die inside a tool (test code,
 * never shipped; the conformance suite's tickets flow is in 'agent-adapter/testing/fixtures').
 */
import { Flow, ToolRegistry, type CheckpointStore } from 'agent-adapter';
import { CrashingStore, settle } from 'agent-adapter/testing';
import { runnerOn } from './specs';

export interface Order {
  show: string;
  note?: string;
}

/**
 * A runner on `inner` (through a {@link CrashingStore}) whose tools append their name to `ran`;
 * `dieIn` kills the store inside that tool, `approve` makes `send` wait for an approval.
 */
export function tickets(
  inner: CheckpointStore,
  options: { dieIn?: string; approve?: boolean } = {},
) {
  const store = new CrashingStore(inner);
  const ran: string[] = [];
  const tool = (name: string) => async () => {
    ran.push(name);
    if (options.dieIn === name) store.kill(`inside ${name}`);
    return `${name} ok`;
  };
  const registry = new ToolRegistry()
    .register('hold_seats', tool('hold_seats'), { idempotent: true })
    .register('charge_card', tool('charge_card'))
    .register('email_tickets', tool('email_tickets'), {
      ...(options.approve && { approval: true }),
    });
  const runner = runnerOn(store, registry);
  return { runner, ran, store };
}

/** The tickets flow; `extra` adds a `thanks` node after `send` (a newer version of the flow). */
export function ticketsFlow(extra = false): Flow<Order> {
  const f = new Flow<Order>('tickets')
    .node('hold', async (o, ctx) => ({
      note: await ctx.call<string>('hold_seats', { show: o.show }),
    }))
    .node('pay', async (o, ctx) => ({
      note: await ctx.call<string>('charge_card', { show: o.show }),
    }))
    .node('send', async (o, ctx) => ({
      note: await ctx.call<string>('email_tickets', { show: o.show }),
    }))
    .edge('hold', 'pay')
    .edge('pay', 'send');
  return extra
    ? f
        .node('thanks', async () => ({ note: 'thanked' }))
        .edge('send', 'thanks')
        .end('thanks')
    : f.end('send');
}

/** A run `runId` whose worker died inside `dieIn`, left `running`. */
export async function crashed(
  store: CheckpointStore,
  runId: string,
  dieIn: string,
): Promise<void> {
  const w = tickets(store, { dieIn });
  await w.runner
    .run(ticketsFlow(), { show: 'Hamlet' }, { runId })
    .catch(() => undefined);
  w.runner.close();
  await settle();
}

/**
 * What a refused command must leave as it was: the run's head (its lease aside, which a live
 * worker renews) and its whole history.
 */
export async function snapshot(store: CheckpointStore, runId: string) {
  const { leaseExpiresAt: _l, ...head } = (await store.head(runId))!;
  return { head, history: await store.history(runId) };
}
