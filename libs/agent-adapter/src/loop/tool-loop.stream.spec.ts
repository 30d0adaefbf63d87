/**
 * A streaming tool loop (`stream: true`): each message the run adds to its history is published
 * once it is saved: the model's replies (never one a crash made the model replace) and the tools'
 * results, in order, each once however the run is cut and recovered.
 */
import {
  DurableSetupError,
  MemoryCheckpointStore,
  ToolLoop,
  ToolRegistry,
  type Json,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import {
  KEY,
  ScriptedModel,
  answer,
  asking,
  sleep,
} from '../../../../test/utils/specs';

const lookup = asking({ id: 'c1', name: 'lookup', arguments: { id: 42 } });

async function entries(loop: ToolLoop, runId: string): Promise<Json[]> {
  const out: Json[] = [];
  for await (const e of loop.stream(runId)) out.push(e.data);
  return out;
}

describe('a streaming tool loop', () => {
  const tools = (onLookup?: () => void) =>
    new ToolRegistry().register(
      'lookup',
      (a: { id: number }) => {
        onLookup?.();
        return `order ${a.id} shipped`;
      },
      { idempotent: true },
    );

  it('publishes the replies and the tool results, in the order of the history', async () => {
    const loop = new ToolLoop(
      new ScriptedModel([lookup, answer('It shipped.')]),
      tools(),
      { checkpoints: new MemoryCheckpointStore(), stream: true },
    );
    const r = await loop.run([{ role: 'user', content: 'where is 42?' }], {
      runId: 's1',
    });
    expect(r.status).toBe('done');
    expect(r.reply?.content).toBe('It shipped.');
    const published = await entries(loop, 's1');
    // Everything after the user's message, exactly as in the history.
    expect(published).toEqual(JSON.parse(JSON.stringify(r.messages.slice(1))));
    expect(published.map((m) => (m as { role: string }).role)).toEqual([
      'assistant',
      'tool',
      'assistant',
    ]);
    loop.close();
  });

  it('a reply cut off before it was saved is not published; the one saved after the recovery is, once', async () => {
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store, (w, moment) => {
      // Dies as the model's first reply is being saved (before it reaches the store).
      return (
        w.kind === 'save' && w.checkpoint.step === 1 && moment === 'before'
      );
    });
    const first = new ToolLoop(
      new ScriptedModel([answer('first try')]),
      tools(),
      { checkpoints: dying, checkpointKey: KEY, leaseMs: 100, stream: true },
    );
    await expect(
      first.run([{ role: 'user', content: 'hi' }], { runId: 's2' }),
    ).rejects.toThrow(SimulatedCrash);
    await settle();
    first.close();
    await sleep(250);
    const second = new ToolLoop(
      new ScriptedModel([answer('second try')]),
      tools(),
      { checkpoints: store, checkpointKey: KEY, stream: true },
    );
    const r = await second.recover('s2');
    expect(r.reply?.content).toBe('second try');
    expect(await entries(second, 's2')).toEqual([
      JSON.parse(JSON.stringify(r.reply)),
    ]);
    second.close();
  });

  it('a crash inside a tool: the recovery publishes nothing twice', async () => {
    const store = new MemoryCheckpointStore();
    const dying = new CrashingStore(store);
    let calls = 0;
    const first = new ToolLoop(
      new ScriptedModel([lookup]),
      tools(() => {
        if (++calls === 1) dying.kill();
      }),
      { checkpoints: dying, checkpointKey: KEY, leaseMs: 100, stream: true },
    );
    await expect(
      first.run([{ role: 'user', content: 'where is 42?' }], { runId: 's3' }),
    ).rejects.toThrow(SimulatedCrash);
    await settle();
    first.close();
    await sleep(250);
    const second = new ToolLoop(
      new ScriptedModel([answer('It shipped.')]),
      tools(() => calls++),
      { checkpoints: store, checkpointKey: KEY, stream: true },
    );
    const r = await second.recover('s3');
    expect(r.status).toBe('done');
    expect(calls).toBe(2); // the idempotent lookup ran again
    expect(await entries(second, 's3')).toEqual(
      JSON.parse(JSON.stringify(r.messages.slice(1))),
    );
    second.close();
  });

  it('refuses a stream option that is not a boolean', () => {
    expect(
      () =>
        new ToolLoop(new ScriptedModel([]), new ToolRegistry(), {
          stream: 'yes' as unknown as boolean,
        }),
    ).toThrow(DurableSetupError);
  });
});
