/**
 * `runs fork` of an unfinished run: refused unless the source is cancelled first (a fork has new
 * idempotency keys, so both runs' side effects would happen twice), and `--cancel-source` cancels
 * through `cancelRun`'s compare-and-set before the fork is written.
 */
import { CheckpointConflict, MemoryCheckpointStore } from 'agent-adapter';
import { openCheckpoint } from '../exec/durable/records';
import { ring } from '../../../../test/utils/specs';
import { CliError } from './cli.error';
import { forkRun } from './fork';
import {
  crashed,
  snapshot,
  tickets,
  ticketsFlow as flow,
} from '../../../../test/utils/cli-tickets';

describe('runs fork of an unfinished run', () => {
  it('is refused without cancelSource, and nothing is written', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'src', 'email_tickets');
    const before = await snapshot(store, 'src');
    const refused = forkRun(store, ring, 'src', 2, { newRunId: 'new' });
    await expect(refused).rejects.toThrow(CliError);
    await expect(refused).rejects.toThrow(
      /has not finished \(running\).*happen twice.*--cancel-source/s,
    );
    expect(await store.head('new')).toBeUndefined();
    expect(await snapshot(store, 'src')).toEqual(before);
  });

  it('a paused run is refused too', async () => {
    const store = new MemoryCheckpointStore();
    const { runner } = tickets(store, { approve: true });
    await runner.run(flow(), { show: 'Hamlet' }, { runId: 'p' });
    runner.close();
    await expect(
      forkRun(store, ring, 'p', 2, { newRunId: 'new' }),
    ).rejects.toThrow(/has not finished \(paused\)/);
    expect(await store.head('new')).toBeUndefined();
  });

  it('with cancelSource: the source is cancelled first (fenced), then the fork is written; only the fork runs', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'src', 'email_tickets');
    const forked = await forkRun(store, ring, 'src', 2, {
      newRunId: 'new',
      cancelSource: true,
      by: 'op',
    });
    expect(forked).toMatchObject({
      runId: 'new',
      cancelled: { runId: 'src', was: 'running' },
    });
    const src = openCheckpoint(ring, (await store.latest('src'))!);
    expect(src).toMatchObject({
      status: 'failed',
      reason: 'cancel',
      error: { name: 'RunCancelled' },
    });
    expect(src.error?.message).toMatch(/cancelled by operator \(op\).*new/);
    // The source's old worker is fenced; a sweep recovers the fork only.
    const w = tickets(store);
    const all = await w.runner.recoverAll(flow(), {
      force: true,
      rerunInDoubt: true,
    });
    w.runner.close();
    expect([...all.keys()]).toEqual(['new']);
    expect(w.ran).toEqual(['email_tickets']);
    await expect(w.runner.recover(flow(), 'src')).rejects.toThrow(
      CheckpointConflict,
    );
  });

  it('a source cancelled by an earlier --cancel-source (crash before the fork) forks without the flag', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'src', 'email_tickets');
    await forkRun(store, ring, 'src', 2, { newRunId: 'a', cancelSource: true });
    await store.delete('a'); // as if the process died between the two writes
    const forked = await forkRun(store, ring, 'src', 2, { newRunId: 'b' });
    expect(forked.cancelled).toBeUndefined();
    // The flag on an ended source cancels nothing and forks.
    const again = await forkRun(store, ring, 'src', 2, {
      newRunId: 'c',
      cancelSource: true,
    });
    expect(again.cancelled).toBeUndefined();
  });

  it('a taken fork id is refused before the source is cancelled', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'src', 'email_tickets');
    await crashed(store, 'other', 'email_tickets');
    const before = await snapshot(store, 'src');
    await expect(
      forkRun(store, ring, 'src', 2, { newRunId: 'other', cancelSource: true }),
    ).rejects.toThrow(/already exists/);
    expect(await snapshot(store, 'src')).toEqual(before);
  });

  it('a source that moves while it is cancelled: nothing is written', async () => {
    const store = new MemoryCheckpointStore();
    await crashed(store, 'src', 'email_tickets');
    // A worker takes the run over between the fork's read and its cancel (the cancel's own read,
    // the second of the latest checkpoint).
    let reads = 0;
    const racing = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'latest') {
          return async (runId: string) => {
            if (++reads === 2 && !moved) {
              moved = true;
              const w = tickets(store);
              await w.runner.recover(flow(), 'src', { rerunInDoubt: true });
              w.runner.close();
            }
            return target.latest(runId);
          };
        }
        const v: unknown = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    let moved = false;
    await expect(
      forkRun(racing, ring, 'src', 2, { newRunId: 'new', cancelSource: true }),
    ).rejects.toThrow(/moved.*nothing was written/s);
    expect(await store.head('new')).toBeUndefined();
    expect((await store.head('src'))?.status).toBe('done');
  });
});
