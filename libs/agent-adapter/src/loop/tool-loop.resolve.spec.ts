/**
 * Resolving a tool loop's call in doubt (issue 15 item 1): the worker dies inside charge_card after
 * it charged; the operator finds the charge and resolves the call "ran" with its result; the loop
 * goes on, the model gets that result as the tool's answer, and the card is charged once.
 */
import {
  MemoryCheckpointStore,
  RecoveryNeedsDecision,
  ToolLoop,
  ToolRegistry,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import {
  KEY,
  ScriptedModel,
  answer,
  asking,
  sleep,
} from '../../../../test/utils/specs';

const charge = asking({
  id: 'c1',
  name: 'charge_card',
  arguments: { amount: 40 },
});
const final = answer('paid');

describe('resolving a tool loop call in doubt', () => {
  it('"it ran": the model gets the given result, the card is charged once', async () => {
    const store = new MemoryCheckpointStore();
    const ledger: number[] = [];
    const dying = new CrashingStore(store);
    const tools = (die: boolean) =>
      new ToolRegistry().register('charge_card', (a: { amount: number }) => {
        ledger.push(a.amount);
        if (die) dying.kill('inside charge_card, after the charge');
        return `charged ${a.amount}`;
      });
    const first = new ToolLoop(new ScriptedModel([charge]), tools(true), {
      checkpoints: dying,
      checkpointKey: KEY,
      leaseMs: 100,
    });
    await expect(
      first.run([{ role: 'user', content: 'pay 40' }], { runId: 'loop-1' }),
    ).rejects.toThrow(SimulatedCrash);
    await settle();
    first.close();
    await sleep(250); // past the dead worker's lease: the run now reads as stuck, not in progress

    const second = new ToolLoop(new ScriptedModel([final]), tools(false), {
      checkpoints: store,
      checkpointKey: KEY,
    });
    await expect(second.recover('loop-1')).rejects.toBeInstanceOf(
      RecoveryNeedsDecision,
    );
    const stuck = await second.get('loop-1');
    expect(stuck.needsDecision?.calls.map((c) => [c.callId, c.tool])).toEqual([
      ['tools#0', 'charge_card'],
    ]);
    const r = await second.resolve('loop-1', {
      calls: [{ call: 'tools#0', ran: true, result: 'charged 40 (ch_9)' }],
      by: 'ann',
    });
    second.close();
    expect(r.status).toBe('done');
    expect(ledger).toEqual([40]);
    expect(
      r.messages.filter((m) => m.role === 'tool').map((m) => m.content),
    ).toEqual(['charged 40 (ch_9)']);
  });
});
