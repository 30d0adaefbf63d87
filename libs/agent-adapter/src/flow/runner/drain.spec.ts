/**
 * Graceful drain (`FlowRunner.drain`): a worker shutting down stops each run it drives at the next
 * superstep boundary, with that checkpoint stored and the lease released, so another worker takes
 * the run at once (due now, not when the lease would have run out) and nothing runs twice.
 */
import {
  Executor,
  FlowRunner,
  WorkerDraining,
  type CheckpointStore,
} from 'agent-adapter';
import {
  KEY,
  ticketsFlow,
  ticketsRegistry,
  type LedgerEntry,
} from 'agent-adapter/testing/fixtures';
import { memoryAndSqlite, sleep } from '../../../../../test/utils/specs';

const ORDER = { show: 'Hamlet', seats: 2 };

/** A worker whose every tool takes `toolMs`; `began` gets each tool's name as it starts. */
function worker(
  store: CheckpointStore,
  ledger: LedgerEntry[],
  name: string,
  toolMs: number,
  began: string[] = [],
): FlowRunner {
  const registry = ticketsRegistry(ledger, name, {
    onTool: (tool) => {
      began.push(tool);
      return sleep(toolMs);
    },
  });
  return new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
    leaseMs: 60_000,
    workerId: name,
  });
}

describe.each(memoryAndSqlite('drain'))('drain on %s', (_name, fresh) => {
  let store: CheckpointStore;
  fresh((s) => (store = s));

  it('stops a run at the next superstep boundary, stored and released; another worker finishes it at once, running nothing twice', async () => {
    const ledger: LedgerEntry[] = [];
    const began: string[] = [];
    const w1 = worker(store, ledger, 'w1', 100, began);
    const running = w1.run(ticketsFlow(), ORDER, { runId: 'o1' });
    running.catch(() => undefined);
    while (!began.length) await sleep(5); // inside the hold (superstep 0)
    const left = await w1.drain({ deadlineMs: 5_000 });
    expect(left).toBe(0);
    const stopped = await running.catch((e: unknown) => e);
    expect(stopped).toBeInstanceOf(WorkerDraining);
    expect(stopped).toMatchObject({ runId: 'o1', worker: 'w1', step: 1 });
    // Released: due now, though its 60 s lease was renewed a moment ago.
    const head = (await store.head('o1'))!;
    expect(head).toMatchObject({ status: 'running', step: 1 });
    expect(head.leaseExpiresAt ?? 0).toBeLessThanOrEqual(Date.now());
    expect(
      (await store.listDue({ now: Date.now() })).map((h) => h.runId),
    ).toEqual(['o1']);

    const w2 = worker(store, ledger, 'w2', 0);
    const done = await w2.recover(ticketsFlow(), 'o1');
    w2.close();
    expect(done.status).toBe('done');
    expect(ledger.map((e) => `${e.worker}:${e.tool}`)).toEqual([
      'w1:hold_seats',
      'w2:charge_card',
      'w2:email_tickets',
    ]);
  });

  it('a superstep that outlasts the deadline: drain resolves with the runs still driven and stops renewing', async () => {
    const w = worker(store, [], 'w', 400);
    const running = w.run(ticketsFlow(), ORDER, { runId: 'o2' });
    running.catch(() => undefined);
    await sleep(50);
    expect(await w.drain({ deadlineMs: 50 })).toBe(1);
    // The superstep goes on; the run stops at its end all the same.
    await expect(running).rejects.toBeInstanceOf(WorkerDraining);
  });

  it('refuses a deadline that is not a whole number of ms', async () => {
    const w = worker(store, [], 'w', 0);
    await expect(w.drain({ deadlineMs: -1 })).rejects.toThrow(/deadlineMs/);
    w.close();
  });
});
