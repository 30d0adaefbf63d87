/**
 * Resolving calls in doubt with what they really did (issue 15 item 1): `ran` replays the outcome
 * given and never runs the tool; `not run` runs it once; the decision is sealed with who, when and
 * why, stored with a compare-and-set (one of two racing decisions wins), and only then spent; a
 * crash after it is stored is recovered by spending it. Bad input is refused with nothing written.
 * On the memory store and on SQLite.
 */
import {
  CheckpointConflict,
  Flow,
  RecoveryNeedsDecision,
  ToolRegistry,
  type CheckpointStore,
  type RunDecidedEvent,
} from 'agent-adapter';
import { CrashingStore } from 'agent-adapter/testing';
import {
  diesOn,
  memoryAndSqlite,
  ring,
  runnerOn,
  sleep,
} from '../../../../../test/utils/specs';
import { readDecisions } from './decisions';
import { storeResolution } from './resolve';

interface Order {
  order: string;
  receipt?: string;
  mailed?: string;
  gift?: string;
}

/**
 * pay (charge_card, not idempotent) and wrap (gift_wrap, idempotent unless told) side by side,
 * then mail.
 * `crash` says which tool kills its worker next, and whether before or after it acted.
 */
function setup({ wrapIsIdempotent = true } = {}) {
  const ledger: string[] = [];
  const crash: { tool?: string; acted?: boolean } = {};
  const flow = new Flow<Order>('orders')
    .node('pay', async (s, ctx) => ({
      receipt: await ctx.call<string>('charge_card', { order: s.order }),
    }))
    .node('wrap', async (s, ctx) => ({
      gift: await ctx.call<string>('gift_wrap', { order: s.order }),
    }))
    .node('mail', async (s, ctx) => ({
      mailed: await ctx.call<string>('send_mail', { to: s.order }),
    }))
    .start('pay', 'wrap')
    .edge('pay', 'mail')
    .edge('wrap', 'mail')
    .end('mail');
  const worker = (inner: CheckpointStore, workerId: string) => {
    const store = new CrashingStore(inner);
    const tool =
      (name: string) => async (a: { order?: string; to?: string }) => {
        if (crash.tool === name && !crash.acted) {
          crash.tool = undefined;
          store.kill(`inside ${name}, before it acted`);
          throw new Error('the worker died');
        }
        ledger.push(name);
        if (crash.tool === name) {
          crash.tool = undefined;
          store.kill(`inside ${name}, after it acted`);
        }
        return `${name}:${a.order ?? a.to}`;
      };
    const registry = new ToolRegistry()
      .register('charge_card', tool('charge_card'))
      .register('gift_wrap', tool('gift_wrap'), {
        idempotent: wrapIsIdempotent,
      })
      .register('send_mail', tool('send_mail'));
    return runnerOn(store, registry, { workerId, leaseMs: 100 });
  };
  return { flow, worker, ledger, crash };
}

const count = (ledger: string[], tool: string) =>
  ledger.filter((t) => t === tool).length;

const stores = memoryAndSqlite('resolve');

describe.each(stores)(
  'resolving calls in doubt on the %s store',
  (_, freshEach) => {
    let store: CheckpointStore;
    freshEach((made) => (store = made));

    /** Runs `id` on w1, which dies inside `tool` (after it acted unless `acted: false`). */
    async function crashIn(
      s: ReturnType<typeof setup>,
      id: string,
      tool: string,
      acted = true,
    ) {
      Object.assign(s.crash, { tool, acted });
      const w1 = s.worker(store, 'w1');
      await diesOn(w1.run(s.flow, { order: id }, { runId: id }), w1);
    }

    it('"it ran", with its result: replayed into the state, never run again; the decision is sealed and announced', async () => {
      const s = setup();
      await crashIn(s, 'o-1', 'charge_card');
      expect(count(s.ledger, 'charge_card')).toBe(1);
      const w2 = s.worker(store, 'w2');
      const decided: RunDecidedEvent[] = [];
      w2.events.on('run.decided', (e) => decided.push(e));
      const result = await w2.resolve(s.flow, 'o-1', {
        calls: [
          {
            call: 'pay#0',
            ran: true,
            result: 'ch_123 (found at the provider)',
          },
        ],
        by: 'alice',
        reason: 'the charge is in the provider dashboard',
      });
      expect(result.status).toBe('done');
      expect(result.state.receipt).toBe('ch_123 (found at the provider)');
      expect(count(s.ledger, 'charge_card')).toBe(1); // never run again
      expect(count(s.ledger, 'send_mail')).toBe(1);
      expect(decided.map((e) => e.decision)).toEqual([
        expect.objectContaining({
          kind: 'resolve',
          calls: ['pay#0'],
          tools: ['charge_card'],
          ran: [true],
          by: 'alice',
          reason: 'the charge is in the provider dashboard',
        }),
      ]);
      const history = await readDecisions(store, ring, 'o-1');
      expect(history.map((d) => [d.kind, d.calls, d.ran, d.by])).toEqual([
        ['resolve', ['pay#0'], [true], 'alice'],
      ]);
      w2.close();
    });

    it('"it ran", with the error it returned: the node gets that error, the tool is not run', async () => {
      const s = setup();
      await crashIn(s, 'o-2', 'charge_card');
      const w2 = s.worker(store, 'w2');
      const result = await w2.resolve(s.flow, 'o-2', {
        calls: [
          {
            call: 'pay#0',
            ran: true,
            error: { name: 'CardDeclined', message: 'insufficient funds' },
          },
        ],
        by: 'bob',
      });
      expect(result.status).toBe('failed');
      expect(result.error?.message).toMatch(/insufficient funds/);
      expect(count(s.ledger, 'charge_card')).toBe(1);
      expect(count(s.ledger, 'send_mail')).toBe(0);
      w2.close();
    });

    it('"it did not run": runs once, and the run finishes', async () => {
      const s = setup();
      await crashIn(s, 'o-3', 'charge_card', false);
      expect(count(s.ledger, 'charge_card')).toBe(0);
      const w2 = s.worker(store, 'w2');
      const result = await w2.resolve(s.flow, 'o-3', {
        calls: [{ call: 'pay#0', ran: false }],
        by: 'carol',
      });
      expect(result.status).toBe('done');
      expect(result.state.receipt).toBe('charge_card:o-3');
      expect(count(s.ledger, 'charge_card')).toBe(1);
      w2.close();
    });

    it('a call it resolved "not run" that dies again is in doubt again (the finding was for the old record)', async () => {
      const s = setup();
      await crashIn(s, 'o-4', 'charge_card', false);
      s.crash.tool = 'charge_card';
      s.crash.acted = true;
      const w2 = s.worker(store, 'w2');
      await diesOn(
        w2.resolve(s.flow, 'o-4', { calls: [{ call: 'pay#0', ran: false }] }),
        w2,
      );
      const w3 = s.worker(store, 'w3');
      await expect(w3.recover(s.flow, 'o-4')).rejects.toBeInstanceOf(
        RecoveryNeedsDecision,
      );
      expect(count(s.ledger, 'charge_card')).toBe(1);
      w3.close();
    });

    it('stored, then the worker dies before spending it: recovery spends the stored decision', async () => {
      const s = setup();
      await crashIn(s, 'o-5', 'charge_card');
      await storeResolution(
        { store, ring },
        'o-5',
        { calls: [{ call: 'pay#0', ran: true, result: 'ch_5' }], by: 'cli' },
        { owner: 'operator:test' },
      );
      const w2 = s.worker(store, 'w2');
      const result = await w2.recover(s.flow, 'o-5');
      expect(result.state.receipt).toBe('ch_5');
      expect(count(s.ledger, 'charge_card')).toBe(1);
      w2.close();
    });

    it('calls left out stay in doubt: recovery stops on them, a second decision settles them', async () => {
      const s = setup({ wrapIsIdempotent: false });
      // Both pay and wrap are cut: wrap dies after acting, pay is started but never finished.
      s.crash.tool = 'gift_wrap';
      s.crash.acted = true;
      const w1 = s.worker(store, 'w1');
      await diesOn(w1.run(s.flow, { order: 'o-6' }, { runId: 'o-6' }), w1);
      await sleep(250); // past w1's lease: until then the run reads as in progress
      const w2 = s.worker(store, 'w2');
      const inDoubt =
        (await w2.get(s.flow, 'o-6')).needsDecision?.calls.map(
          (c) => c.callId,
        ) ?? [];
      if (inDoubt.length < 2) {
        // pay finished before wrap died on this store's timing: only wrap is in doubt.
        expect(inDoubt).toEqual(['wrap#0']);
      } else {
        expect(inDoubt.sort()).toEqual(['pay#0', 'wrap#0']);
        await expect(
          w2.resolve(s.flow, 'o-6', {
            calls: [{ call: 'wrap#0', ran: true, result: 'wrapped' }],
          }),
        ).rejects.toBeInstanceOf(RecoveryNeedsDecision);
      }
      const result = await w2.resolve(s.flow, 'o-6', {
        calls:
          inDoubt.length < 2
            ? [{ call: 'wrap#0', ran: true, result: 'wrapped' }]
            : // It did act (its tool ran before the worker died): say so.
              [{ call: 'pay#0', ran: true, result: 'ch_6' }],
      });
      expect(result.status).toBe('done');
      expect(result.state.gift).toBe('wrapped');
      expect(count(s.ledger, 'gift_wrap')).toBe(1);
      expect(count(s.ledger, 'charge_card')).toBe(1);
      w2.close();
    });

    it('two decisions at once: one wins, the other is CheckpointConflict; the charge never runs again', async () => {
      const s = setup();
      await crashIn(s, 'o-7', 'charge_card');
      const outcomes = await Promise.allSettled([
        storeResolution(
          { store, ring },
          'o-7',
          { calls: [{ call: 'pay#0', ran: true, result: 'a' }] },
          { owner: 'op-a' },
        ),
        storeResolution(
          { store, ring },
          'o-7',
          { calls: [{ call: 'pay#0', ran: false }] },
          { owner: 'op-b' },
        ),
      ]);
      const won = outcomes.filter((o) => o.status === 'fulfilled');
      const lost = outcomes.filter(
        (o): o is PromiseRejectedResult => o.status === 'rejected',
      );
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect(lost[0]!.reason).toBeInstanceOf(CheckpointConflict);
      const w2 = s.worker(store, 'w2');
      const result = await w2.recover(s.flow, 'o-7');
      expect(result.status).toBe('done');
      // The winner decided: either the charge is replayed ("a"), or it ran once more because it did not run.
      expect(count(s.ledger, 'charge_card')).toBe(
        result.state.receipt === 'a' ? 1 : 2,
      );
      w2.close();
    });

    it('bad input is refused with a message naming it, and nothing is written', async () => {
      const s = setup();
      await crashIn(s, 'o-8', 'charge_card');
      const before = await store.head('o-8');
      const w2 = s.worker(store, 'w2');
      const refused = async (request: unknown, message: RegExp) => {
        const err = await w2
          .resolve(s.flow, 'o-8', request as never)
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(TypeError);
        expect((err as Error).message).toMatch(message);
      };
      await refused({ calls: [] }, /calls must be a non-empty array/);
      await refused(
        { calls: [{ call: 'mail#0', ran: true }] },
        /call mail#0 is not in doubt.*The calls in doubt are: pay#0 \(charge_card\)/,
      );
      await refused(
        { calls: [{ call: 'pay', ran: true }] },
        /call id "node#index"/,
      );
      await refused(
        { calls: [{ call: 'pay#0', ran: 'yes' }] },
        /ran must be true or false/,
      );
      await refused(
        { calls: [{ call: 'pay#0', ran: true, result: () => 1 }] },
        /its result is not JSON/,
      );
      await refused(
        {
          calls: [
            {
              call: 'pay#0',
              ran: true,
              result: 1,
              error: { name: 'E', message: 'm' },
            },
          ],
        },
        /not both/,
      );
      await refused(
        { calls: [{ call: 'pay#0', ran: false, result: 1 }] },
        /did not run has no result/,
      );
      await refused(
        {
          calls: [
            { call: 'pay#0', ran: true },
            { call: 'pay#0', ran: false },
          ],
        },
        /given twice/,
      );
      expect(await store.head('o-8')).toEqual(before);
      expect(count(s.ledger, 'charge_card')).toBe(1);
      w2.close();
    });
  },
);
