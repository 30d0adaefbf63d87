/**
 * A call's identity in a tool loop is its position in the model's reply: a call answered without
 * running (a tool this deployment no longer has, arguments that are not an object) spends its
 * index, so a recovery on a worker with another set of tools replays each finished call as itself
 * and never runs a finished charge again (found by review: indexes used to shift).
 */
import {
  MemoryCheckpointStore,
  ToolLoop,
  ToolRegistry,
  idempotencyKey,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import {
  KEY,
  ScriptedModel,
  answer,
  asking,
  attempt,
} from '../../../../test/utils/specs';

const reply = asking(
  { id: 'a', name: 'legacy_lookup', arguments: { q: 'x' } },
  { id: 'b', name: 'charge_card', arguments: { amount: 40 } },
  { id: 'c', name: 'slow_check', arguments: {} },
);
const final = answer('done');

function registry(
  ledger: string[],
  options: { legacy: boolean; onSlow?: () => void },
): ToolRegistry {
  const r = new ToolRegistry();
  if (options.legacy)
    r.register('legacy_lookup', () => 'found', { readOnly: true });
  return r
    .register('charge_card', () => {
      ledger.push(`charge ${idempotencyKey()}`);
      return 'charged';
    })
    .register('slow_check', async () => {
      await new Promise((resolve) => setTimeout(resolve, 30));
      options.onSlow?.();
      return 'ok';
    });
}

describe('tool loop call indexes', () => {
  it('a recovery on a deployment without one of the tools still replays the finished charge', async () => {
    const store = new MemoryCheckpointStore();
    const ledger: string[] = [];
    const dying = new CrashingStore(store);
    const first = new ToolLoop(
      new ScriptedModel([reply]),
      registry(ledger, {
        legacy: true,
        onSlow: () => dying.kill('inside slow_check'),
      }),
      { checkpoints: dying, checkpointKey: KEY },
    );
    await expect(
      first.run([{ role: 'user', content: 'pay' }], { runId: 'r1' }),
    ).rejects.toThrow(SimulatedCrash);
    await settle();
    first.close();
    expect(ledger).toHaveLength(1);

    // The next deploy has no legacy_lookup: its call is answered as unknown, at its own index.
    const model = new ScriptedModel([final]);
    const second = new ToolLoop(model, registry(ledger, { legacy: false }), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    const r = await second.recover('r1', { rerunInDoubt: true });
    second.close();
    expect(r.status).toBe('done');
    expect(ledger).toHaveLength(1); // charge_card replayed, not run again
    const results = r.messages.filter((m) => m.role === 'tool');
    expect(results.map((m) => [m.toolCallId, m.content])).toEqual([
      ['a', expect.stringMatching(/no tool named "legacy_lookup"/)],
      ['b', 'charged'],
      ['c', 'ok'],
    ]);
  });

  it('a pending approval names its own tool call, whatever comes before it in the reply', async () => {
    const store = new MemoryCheckpointStore();
    const tools = new ToolRegistry().register('refund', () => 'refunded', {
      approval: true,
    });
    const loop = new ToolLoop(
      new ScriptedModel([
        asking(
          { id: 'x', name: 'nope', arguments: {} },
          { id: 'y', name: 'refund', arguments: { amount: 5 } },
        ),
      ]),
      tools,
      { checkpoints: store, checkpointKey: KEY },
    );
    const r = await loop.run([{ role: 'user', content: 'refund' }], {
      runId: 'p1',
    });
    loop.close();
    expect(r.status).toBe('paused');
    expect(r.pending).toMatchObject({
      tool: 'refund',
      index: 1,
      toolCallId: 'y',
    });
  });
});

describe('tool loop timeouts', () => {
  const retryingModel = () =>
    new ScriptedModel([
      asking({ id: '1', name: 'charge_card', arguments: { amount: 40 } }),
      // What a model does with an error: try again.
      asking({ id: '2', name: 'charge_card', arguments: { amount: 40 } }),
      final,
    ]);

  function slowCharge(ledger: string[], idempotent: boolean): ToolRegistry {
    return new ToolRegistry().register(
      'charge_card',
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 60));
        ledger.push('charged');
        return 'charged';
      },
      { timeoutMs: 20, idempotent },
    );
  }

  /** A loop asked to pay with a charge that times out: its result, its model, what was charged. */
  async function paidSlowly(idempotent: boolean) {
    const ledger: string[] = [];
    const model = retryingModel();
    const loop = new ToolLoop(model, slowCharge(ledger, idempotent));
    const r = await loop.run([{ role: 'user', content: 'pay' }]);
    loop.close();
    return { ledger, model, r };
  }

  it('a non-idempotent call that timed out fails the run closed: the model is not asked to retry it', async () => {
    const { ledger, model, r } = await paidSlowly(false);
    await new Promise((resolve) => setTimeout(resolve, 100)); // the abandoned attempt ends
    expect(r.status).toBe('failed');
    expect(r.error).toMatchObject({ name: 'ToolTimeout' });
    expect(model.requests).toHaveLength(1);
    expect(ledger).toEqual(['charged']);
  });

  it('an idempotent call that timed out is an error result the model may act on', async () => {
    const { model, r } = await paidSlowly(true);
    expect(r.status).toBe('done');
    expect(model.requests).toHaveLength(3);
    const first = r.messages.find((m) => m.role === 'tool');
    expect(first).toMatchObject({
      isError: true,
      content: expect.stringMatching(/ToolTimeout/),
    });
  });

  it('maxRecoveryAttempts parks a loop whose model call keeps killing its worker', async () => {
    const store = new MemoryCheckpointStore();
    let modelCalls = 0;
    const loopOn = (dying: CrashingStore) =>
      new ToolLoop(
        {
          // The worker dies before the reply is checkpointed: its store is cut off.
          complete: () => {
            modelCalls++;
            dying.kill('after the model answered');
            return Promise.resolve(answer('hello'));
          },
        },
        new ToolRegistry(),
        { checkpoints: dying, checkpointKey: KEY, maxRecoveryAttempts: 2 },
      );
    const once = (work: (loop: ToolLoop) => Promise<unknown>) =>
      attempt(work, loopOn(new CrashingStore(store)));
    expect(
      await once((l) =>
        l.run([{ role: 'user', content: 'hi' }], { runId: 'm1' }),
      ),
    ).toBeInstanceOf(SimulatedCrash);
    for (let i = 0; i < 2; i++)
      expect(await once((l) => l.recover('m1'))).toBeInstanceOf(SimulatedCrash);
    expect(modelCalls).toBe(3);
    const parked = await once((l) => l.recover('m1'));
    expect(parked).toMatchObject({
      status: 'failed',
      error: { name: 'RecoveryAttemptsExceeded' },
    });
    expect(modelCalls).toBe(3); // the parking recovery did not ask the model again
  });
});
