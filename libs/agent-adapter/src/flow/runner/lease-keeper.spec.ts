/**
 * Lease renewal follows the runs a worker drives, counted per drive.
 */
import {
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  ToolRegistry,
} from 'agent-adapter';
import { sleep } from '../../../../../test/utils/specs';
import { runnerOn } from '../../../../../test/utils/specs';

class S {
  note = '';
}

describe('FlowRunner lease renewal', () => {
  it('a run this worker still drives keeps its lease when an earlier drive of the same run in this worker ends', async () => {
    const store = new MemoryCheckpointStore();
    let releaseFirst!: () => void;
    const firstBlocked = new Promise<void>((r) => (releaseFirst = r));
    let entered!: () => void;
    const firstEntered = new Promise<void>((r) => (entered = r));
    let slowCalls = 0;
    let releaseLong!: () => void;
    const long = new Promise<void>((r) => (releaseLong = r));
    const registry = new ToolRegistry()
      .register(
        'slow',
        async () => {
          if (++slowCalls === 1) {
            entered();
            await firstBlocked;
          }
          return 'ok';
        },
        { idempotent: true },
      )
      .register('long', async () => {
        await long;
        return 'done';
      });
    const flow = new Flow('lease', { state: S })
      .node('a', async (_s, ctx) => ({
        note: await ctx.call<string>('slow', {}),
      }))
      .node('b', async (_s, ctx) => ({
        note: await ctx.call<string>('long', {}),
      }))
      .edge('a', 'b')
      .end('b');
    // A lease long enough that a renewal a third of the way in still lands when a loaded CI
    // machine stalls the event loop for 500 ms (with 300 ms, a 125 ms stall let it lapse).
    const runner = runnerOn(store, registry, {
      leaseMs: 1200,
    });

    // Drive 1 is inside the idempotent `slow` call; an operator (or recoverAll({ force })) recovers
    // the run in the same process: drive 2 claims it, reruns `slow` and moves on into `long`.
    const first = runner.run(flow, {}, { runId: 'd' }).catch((e: unknown) => e);
    await firstEntered;
    const second = runner.recover(flow, 'd');
    await sleep(50);
    // Drive 1's call finishes; its `done` write is fenced and drive 1 ends with CheckpointConflict:
    // its `finally` removes 'd' from the renewed set although drive 2 is still driving it.
    releaseFirst();
    expect(await first).toBeInstanceOf(Error);
    await sleep(1500); // > leaseMs: drive 2 is healthy, inside `long`
    const head = await store.head('d');
    const live = (head?.leaseExpiresAt ?? 0) > Date.now();
    const renewed = (
      runner as unknown as { leases: { isDriving(runId: string): boolean } }
    ).leases.isDriving('d');
    releaseLong();
    await second;
    runner.close();
    // Any worker's recoverAll would now claim the healthy run and fence drive 2.
    expect({ renewed, live }).toEqual({ renewed: true, live: true });
  });
});

describe('FlowRunner workerId (the owner column of a run head: VARCHAR(200))', () => {
  const executor = () => new Executor(new ToolRegistry());

  it.each<[string, unknown]>([
    ['201 characters', 'w'.repeat(201)],
    ['empty', ''],
    ['not a string', 42],
    ['a NUL byte', 'worker\0one'],
    ['a line break', 'worker\none'],
  ])(
    'refuses a workerId that is %s at construction, naming it',
    (_what, id) => {
      expect(
        () => new FlowRunner(executor(), { workerId: id as string }),
      ).toThrow(
        /^FlowRunner: workerId must be a non-empty string of at most 200 characters without control characters/,
      );
    },
  );

  it('accepts 200 characters (counted as Postgres counts them) and the default', () => {
    const max = 'é'.repeat(100) + '😀'.repeat(100); // 200 characters, 300 UTF-16 units
    expect(new FlowRunner(executor(), { workerId: max }).workerId).toBe(max);
    expect(new FlowRunner(executor()).workerId).toMatch(/^.+:\d+:[0-9a-f]{8}$/);
  });
});

describe("a worker's own takeover", () => {
  it('never takes a run this worker is driving, however late its renewal (a stalled event loop)', async () => {
    const store = new MemoryCheckpointStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let runs = 0;
    const registry = new ToolRegistry().register(
      'wait',
      async () => {
        runs++;
        await gate;
        return 'ok';
      },
      { idempotent: true },
    );
    const flow = new Flow<S>('stalls')
      .node('n', async (_s, ctx) => ({ note: await ctx.call<string>('wait') }))
      .end('n');
    const runner = new FlowRunner(new Executor(registry), {
      checkpoints: store,
      leaseMs: 100,
    });
    const done = runner.run(flow, {}, { runId: 'own' });
    await sleep(30);
    // The lease in the store runs out, as if this worker's renewals had stalled.
    await store.renewLeases(runner.workerId, Date.now() - 1, ['own']);
    const takeover = runner.takeOver([flow], { everyMs: 20 });
    await sleep(200);
    release();
    expect((await done).status).toBe('done');
    await takeover.stop();
    expect(runs).toBe(1); // taken over here, the idempotent call would have run again
    runner.close();
  });
});
