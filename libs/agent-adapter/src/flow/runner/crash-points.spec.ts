/**
 * A crash simulated at every point of a superstep, for every tool of two flows, and recovery from
 * each: no call that was `done` runs again, calls in doubt fail closed (and nothing is written
 * when they do), and the recovered run ends in the state an uncrashed run ends in.
 */
import {
  Call,
  CheckpointConflict,
  CheckpointNotFound,
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  RecoveryNeedsDecision,
  ToolRegistry,
  idempotencyKey,
  type RunResult,
} from 'agent-adapter';
import {
  CrashingStore,
  SimulatedCrash,
  settle,
  type CrashPredicate,
} from 'agent-adapter/testing';
import { bodyOf, decode, KEY, runnerOn } from '../../../../../test/utils/specs';

interface Entry {
  tool: string;
  worker: string;
  key: string;
}

interface Scenario {
  name: string;
  flow: Flow<Record<string, unknown>>;
  tools: Record<
    string,
    { idempotent: boolean; result: (args: Record<string, unknown>) => unknown }
  >;
  input: Record<string, unknown>;
}

const tickets: Scenario = {
  name: 'tickets (sequential)',
  flow: new Flow('tickets')
    .node(
      'hold',
      Call('hold_seats', {
        args: (o) => ({ show: o.show, seats: o.seats }),
        into: 'note',
      }),
    )
    .node(
      'pay',
      Call('charge_card', {
        args: (o) => ({ show: o.show, seats: o.seats }),
        into: 'note',
      }),
    )
    .node(
      'send',
      Call('email_tickets', { args: (o) => ({ show: o.show }), into: 'note' }),
    )
    .edge('hold', 'pay')
    .edge('pay', 'send')
    .end('send'),
  tools: {
    hold_seats: { idempotent: true, result: (a) => `held ${String(a.seats)}` },
    charge_card: {
      idempotent: false,
      result: (a) => `charged ${String(a.seats)}`,
    },
    email_tickets: {
      idempotent: false,
      result: (a) => `sent ${String(a.show)}`,
    },
  },
  input: { show: 'Hamlet', seats: 2 },
};

const parallel: Scenario = {
  name: 'parallel branches, two calls in one node',
  flow: new Flow('fan')
    .node('a', async (s, ctx) => {
      const quote = await ctx.call<number>('quote', { item: s.item });
      const booked = await ctx.call<string>('book', {
        item: s.item,
        price: quote,
      });
      return { a: booked };
    })
    .node('b', async (s, ctx) => ({
      b: await ctx.call<string>('notify', { item: s.item }),
    }))
    .node('join', async (s, ctx) => ({
      done: await ctx.call<string>('archive', { a: s.a, b: s.b }),
    }))
    .start('a', 'b')
    .edge('a', 'join')
    .edge('b', 'join')
    .end('join'),
  tools: {
    quote: { idempotent: true, result: () => 42 },
    book: { idempotent: false, result: (a) => `booked at ${String(a.price)}` },
    notify: { idempotent: false, result: () => 'notified' },
    archive: {
      idempotent: true,
      result: (a) => `archived ${String(a.a)}+${String(a.b)}`,
    },
  },
  input: { item: 'seat-9' },
};

const points = [
  'before started',
  'after started',
  'inside the tool',
  'before done',
  'after done',
  'before save',
  'after save',
] as const;
type Point = (typeof points)[number];

function registry(
  s: Scenario,
  ledger: Entry[],
  worker: string,
  enter?: (tool: string) => void,
): ToolRegistry {
  const r = new ToolRegistry();
  for (const [name, t] of Object.entries(s.tools)) {
    r.register(
      name,
      async (args: Record<string, unknown>) => {
        enter?.(name);
        ledger.push({ tool: name, worker, key: idempotencyKey() });
        return t.result(args);
      },
      { idempotent: t.idempotent },
    );
  }
  return r;
}

/** Dies at `point` relative to the call of `tool`. */
function crashAt(point: Point, tool: string): CrashPredicate {
  let startedStored = false;
  return (w, moment) => {
    const has = (phase: string) =>
      w.calls.some((c) => c.tool === tool && c.phase === phase);
    switch (point) {
      case 'before started':
      case 'after started': {
        const hit = has('started') && moment === point.split(' ')[0];
        if (has('started') && moment === 'after') startedStored = true;
        return hit;
      }
      case 'before done':
      case 'after done':
        return has('done') && moment === point.split(' ')[0];
      case 'before save':
      case 'after save': {
        // The save that closes the tool's superstep: the first after the write that stored its
        // `started` (itself a save when it went out with the previous superstep's checkpoint).
        const hit =
          startedStored && w.kind === 'save' && moment === point.split(' ')[0];
        if (has('started') && moment === 'after') startedStored = true;
        return hit;
      }
      case 'inside the tool':
        return false;
    }
  };
}

async function reference(s: Scenario): Promise<unknown> {
  const runner = new FlowRunner(new Executor(registry(s, [], 'ref')));
  return (await runner.run(s.flow, s.input)).state;
}

describe.each([tickets, parallel])(
  'crash at every point of a superstep: $name',
  (s) => {
    const cases = Object.keys(s.tools).flatMap((tool) =>
      points.map((point) => [tool, point] as const),
    );

    it.each(cases)(
      'crash %s / %s: no done call runs twice, doubt fails closed',
      async (tool, point) => {
        const expected = await reference(s);
        const ledger: Entry[] = [];
        const inner = new MemoryCheckpointStore();
        const dying = new CrashingStore(inner, crashAt(point, tool));
        let armed = point === 'inside the tool';
        const enter = (t: string) => {
          if (!armed || t !== tool) return;
          // The tool has begun its side effect when the worker dies.
          armed = false;
          ledger.push({ tool, worker: 'w1', key: 'partial' });
          dying.kill();
        };
        const w1 = new FlowRunner(
          new Executor(registry(s, ledger, 'w1', enter)),
          {
            checkpoints: dying,
            checkpointKey: KEY,
          },
        );

        const first = await w1.run(s.flow, s.input, { runId: 'r1' }).then(
          (r) => r,
          (e: unknown) => e,
        );
        await settle();
        expect(first).toBeInstanceOf(SimulatedCrash);

        const before = await inner.history('r1');
        if (before.checkpoints.length === 0) {
          // Dead before the run's first write (step 0 goes out with the first call's `started`):
          // nothing is stored, nothing ran, and the caller of run() saw the error.
          expect(ledger).toHaveLength(0);
          await expect(
            runnerOn(inner, registry(s, ledger, 'w2')).recover(s.flow, 'r1'),
          ).rejects.toBeInstanceOf(CheckpointNotFound);
          return;
        }
        const decoded = before.calls.map(decode);
        const doneBefore = new Set(
          decoded.filter((c) => c.phase === 'done').map((c) => c.tool),
        );
        const latest = before.checkpoints[before.checkpoints.length - 1]!;
        const calls = (
          await inner.calls('r1', Number(bodyOf(latest.sealed).superstep))
        ).map(decode);
        const cutDone = new Set(
          calls.filter((c) => c.phase === 'done').map((c) => c.tool),
        );
        const inDoubt = [
          ...new Set(
            calls
              .filter((c) => c.phase === 'started' && !cutDone.has(c.tool))
              .map((c) => c.tool),
          ),
        ];
        const undecided = inDoubt.filter((t) => !s.tools[t]!.idempotent).sort();

        const w1Runs = ledger.length;
        const w2 = runnerOn(inner, registry(s, ledger, 'w2'));
        let result: RunResult<Record<string, unknown>>;
        if (latest.status === 'done') {
          await expect(w2.recover(s.flow, 'r1')).rejects.toBeInstanceOf(
            CheckpointConflict,
          );
          result = await w2.get(s.flow, 'r1');
        } else if (undecided.length) {
          const error = await w2.recover(s.flow, 'r1').catch((e: unknown) => e);
          expect(error).toBeInstanceOf(RecoveryNeedsDecision);
          expect(
            (error as RecoveryNeedsDecision).calls.map(([t]) => t).sort(),
          ).toEqual(undecided);
          expect(await inner.history('r1')).toEqual(before); // nothing written
          expect(ledger).toHaveLength(w1Runs); // nothing run
          result = await w2.recover(s.flow, 'r1', { rerunInDoubt: true });
        } else {
          result = await w2.recover(s.flow, 'r1');
        }

        expect(result.status).toBe('done');
        expect(result.state).toEqual(expected);
        const byW2 = ledger.filter((e) => e.worker === 'w2');
        for (const t of doneBefore)
          expect(byW2.filter((e) => e.tool === t)).toHaveLength(0);
        for (const t of Object.keys(s.tools)) {
          // Every tool ran; a non-idempotent one twice only if it was in doubt and we decided so.
          const runs = ledger.filter((e) => e.tool === t).length;
          expect(runs).toBeGreaterThanOrEqual(1);
          if (!s.tools[t]!.idempotent && !inDoubt.includes(t))
            expect(runs).toBe(1);
        }
        // A rerun call carries the idempotency key it had on the crashed worker.
        for (const t of inDoubt) {
          const keys = new Set(
            ledger
              .filter((e) => e.tool === t && e.key !== 'partial')
              .map((e) => e.key),
          );
          expect(keys.size).toBe(1);
        }
      },
    );
  },
);
