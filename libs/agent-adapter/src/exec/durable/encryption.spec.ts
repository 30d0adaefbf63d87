/**
 * Payload encryption at rest (issue 6, items 7 and 8): a database reader sees no state, argument
 * or result; the seal still covers the ciphertext; a wrong or missing encryption key is a clear
 * error with nothing changed; a rotated key reads old records and writes new ones.
 */
import {
  CheckpointKeyError,
  CheckpointStoreCorrupt,
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  ToolRegistry,
  type CheckpointKey,
  type CheckpointRecord,
  type CheckpointStore,
} from 'agent-adapter';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';

const KEY = 'the-sealing-key-of-at-least-32-bytes';
const OLD = 'an-encryption-key-of-at-least-32-bytes';
const NEW = 'a-newer-encryption-key-of-32-bytes!!';
const SECRET = 'card-4242-4242-4242';

interface S {
  card: string;
  quote?: string;
  mail?: string;
}

function setup(ran: string[], kill?: () => void) {
  const registry = new ToolRegistry()
    .register('quote', (a: { card: string }) => {
      ran.push('quote');
      return `quoted for ${a.card}`;
    })
    .register(
      'mail',
      (a: { card: string }) => {
        ran.push('mail');
        kill?.();
        return `mailed ${a.card}`;
      },
      { idempotent: true },
    );
  const flow = new Flow<S>('secrets')
    .node('price', async (s, ctx) => ({
      quote: await ctx.call<string>('quote', { card: s.card }),
    }))
    .node('send', async (s, ctx) => ({
      mail: await ctx.call<string>('mail', { card: s.card }),
    }))
    .edge('price', 'send')
    .end('send');
  return { registry, flow };
}

function runner(
  store: CheckpointStore,
  ran: string[],
  encryptionKey?: CheckpointKey,
  kill?: () => void,
) {
  const { registry, flow } = setup(ran, kill);
  const r = new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
    ...(encryptionKey !== undefined && { encryptionKey }),
  });
  return { r, flow };
}

/** A run cut short inside mail (quote finished), written with `encryptionKey`. */
async function cut(
  store: MemoryCheckpointStore,
  runId: string,
  encryptionKey: CheckpointKey,
) {
  const dying = new CrashingStore(store);
  const { r, flow } = runner(dying, [], encryptionKey, () =>
    dying.kill('inside mail'),
  );
  await expect(r.run(flow, { card: SECRET }, { runId })).rejects.toThrow(
    SimulatedCrash,
  );
  await settle();
  r.close();
}

async function everything(
  store: CheckpointStore,
  runId: string,
): Promise<string> {
  const { checkpoints, calls } = await store.history(runId);
  return JSON.stringify([...checkpoints, ...calls]);
}

/** The memory store with its rows reachable, as a database writer's would be. */
class RawMemoryStore extends MemoryCheckpointStore {
  checkpointsOf(runId: string): CheckpointRecord[] {
    return this.runs.get(runId)!.checkpoints;
  }
}

describe('payload encryption at rest', () => {
  it('a database reader sees no state, argument or result; the run works and recovers as always', async () => {
    const store = new MemoryCheckpointStore();
    await cut(store, 'enc-1', OLD);
    const stored = await everything(store, 'enc-1');
    expect(stored).not.toContain(SECRET);
    expect(stored).not.toContain('quoted for');
    expect(stored).toContain('aa-enc1.');

    const ran: string[] = [];
    const { r, flow } = runner(store, ran, OLD);
    const done = await r.recover(flow, 'enc-1');
    r.close();
    expect(done.state).toEqual({
      card: SECRET,
      quote: `quoted for ${SECRET}`,
      mail: `mailed ${SECRET}`,
    });
    expect(ran).toEqual(['mail']); // quote's encrypted result replayed
    expect(await everything(store, 'enc-1')).not.toContain(SECRET);
  });

  it.each<[string, CheckpointKey, CheckpointKey]>([
    ['the checkpoint key', KEY, KEY],
    ['the checkpoint key as a Buffer', KEY, Buffer.from(KEY)],
    ['a previous checkpoint key', { current: NEW, previous: [KEY] }, KEY],
    [
      'the checkpoint key, as a previous encryption key with its own id',
      KEY,
      { current: OLD, previous: [{ id: 'enc0', secret: KEY }] },
    ],
  ])(
    'refuses an encryptionKey that is %s at construction (key separation)',
    (_what, checkpointKey, encryptionKey) => {
      const make = () =>
        new FlowRunner(new Executor(new ToolRegistry()), {
          checkpoints: new MemoryCheckpointStore(),
          checkpointKey,
          encryptionKey,
        });
      expect(make).toThrow(CheckpointKeyError);
      expect(make).toThrow(
        /^The encryption key must not be a checkpoint key: /,
      );
    },
  );

  it('without the encryption key: a clear CheckpointKeyError, and nothing is changed', async () => {
    const store = new MemoryCheckpointStore();
    await cut(store, 'enc-2', OLD);
    const before = await everything(store, 'enc-2');
    const ran: string[] = [];
    const { r, flow } = runner(store, ran);
    const error = await r.recover(flow, 'enc-2').catch((e: unknown) => e);
    r.close();
    expect(error).toBeInstanceOf(CheckpointKeyError);
    expect((error as Error).message).toMatch(
      /encrypted, and this worker has no encryption key.*Nothing was changed/,
    );
    expect(ran).toEqual([]);
    expect(await everything(store, 'enc-2')).toBe(before);
  });

  it('with a wrong encryption key: a clear CheckpointKeyError naming the key id, and nothing is changed', async () => {
    const store = new MemoryCheckpointStore();
    await cut(store, 'enc-3', OLD);
    const before = await everything(store, 'enc-3');
    const ran: string[] = [];
    const { r, flow } = runner(store, ran, NEW);
    const error = await r.recover(flow, 'enc-3').catch((e: unknown) => e);
    r.close();
    expect(error).toBeInstanceOf(CheckpointKeyError);
    expect((error as Error).message).toMatch(
      /encrypted with key id "[^"]+", which is not in this worker's encryption key ring/,
    );
    expect(ran).toEqual([]);
    expect(await everything(store, 'enc-3')).toBe(before);
  });

  it('a rotated key: { current: NEW, previous: [OLD] } reads what OLD wrote and writes with NEW', async () => {
    const store = new MemoryCheckpointStore();
    await cut(store, 'enc-4', OLD);
    const ran: string[] = [];
    const { r, flow } = runner(store, ran, { current: NEW, previous: [OLD] });
    const done = await r.recover(flow, 'enc-4');
    r.close();
    expect(done.status).toBe('done');
    expect(ran).toEqual(['mail']);
    // The last checkpoint needs NEW: a worker with OLD only cannot read it.
    const oldOnly = runner(store, [], OLD);
    await expect(oldOnly.r.get(oldOnly.flow, 'enc-4')).rejects.toBeInstanceOf(
      CheckpointKeyError,
    );
    oldOnly.r.close();
  });

  it('the seal covers the ciphertext: a changed byte of it is CheckpointStoreCorrupt, and nothing runs', async () => {
    const store = new RawMemoryStore();
    await cut(store, 'enc-5', OLD);
    const record = (await store.latest('enc-5'))!;
    const at = record.sealed.indexOf('aa-enc1.') + 40;
    const flipped = `${record.sealed.slice(0, at)}${record.sealed[at] === 'A' ? 'B' : 'A'}${record.sealed.slice(at + 1)}`;
    store.checkpointsOf('enc-5').find((c) => c.step === record.step)!.sealed =
      flipped;
    const ran: string[] = [];
    const { r, flow } = runner(store, ran, OLD);
    await expect(r.recover(flow, 'enc-5')).rejects.toBeInstanceOf(
      CheckpointStoreCorrupt,
    );
    r.close();
    expect(ran).toEqual([]);
  });
});
