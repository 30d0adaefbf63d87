/**
 * Small helpers the library's unit specs share (test code, never shipped; the store wrappers and
 * flows that tests share are in 'agent-adapter/testing').
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Executor,
  FlowRunner,
  KeyRing,
  MemoryCheckpointStore,
  RecoveryNeedsDecision,
  SQLiteCheckpointStore,
  type AssistantMessage,
  type ChatModel,
  type ChatRequest,
  type CheckpointStore,
  type FlowRunnerOptions,
  type ToolCall,
  type ToolRegistry,
} from 'agent-adapter';
import { SimulatedCrash, settle } from 'agent-adapter/testing';
import { KEY } from 'agent-adapter/testing/fixtures';

export { KEY };

/** The key ring of the shared test key, for specs that open or seal records themselves. */
export const ring = KeyRing.from(KEY);

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `ok` every 20 ms until it holds (true) or `ms` pass (false). */
export async function until(
  ok: () => Promise<boolean>,
  ms: number,
): Promise<boolean> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) return false;
    await sleep(20);
  }
  return true;
}

/**
 * The error of class `type` that `fn` throws: fails the test if `fn` throws something else, and
 * throws if it throws nothing.
 */
export function thrownBy<E>(
  type: abstract new (...args: never[]) => E,
  fn: () => unknown,
): E {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(type);
    return error as E;
  }
  throw new Error(`expected ${type.name}, nothing was thrown`);
}

/**
 * `attempt` fails with the simulated crash; then `worker` (if given) is closed and the dying
 * store's writes have settled.
 */
export async function diesOn(
  attempt: Promise<unknown>,
  worker?: { close(): void },
): Promise<void> {
  await expect(attempt).rejects.toBeInstanceOf(SimulatedCrash);
  worker?.close();
  await settle();
}

/**
 * Runs `work` on `worker` (a runner or loop whose store may die), then closes it and lets its
 * writes settle: what `work` returned, or the simulated crash.
 */
export async function attempt<W extends { close(): void }, T>(
  work: (worker: W) => Promise<T>,
  worker: W,
): Promise<T | SimulatedCrash> {
  try {
    return await work(worker);
  } catch (error) {
    if (error instanceof SimulatedCrash) return error;
    throw error;
  } finally {
    worker.close();
    await settle();
  }
}

/**
 * The calls in doubt (`[tool, why]`) that `recovery` is refused over: fails the test unless it
 * rejects with RecoveryNeedsDecision.
 */
export async function callsInDoubt(
  recovery: Promise<unknown>,
): Promise<RecoveryNeedsDecision['calls']> {
  const error = await recovery.catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RecoveryNeedsDecision);
  return (error as RecoveryNeedsDecision).calls;
}

/** A model's reply asking for `calls`, with no text. */
export const asking = (...calls: ToolCall[]): AssistantMessage => ({
  role: 'assistant',
  content: '',
  toolCalls: calls,
});

/** A model's final reply, saying `content`. */
export const answer = (content: string): AssistantMessage => ({
  role: 'assistant',
  content,
});

/** A chat model that answers with `replies` in turn and keeps every request it was sent. */
export class ScriptedModel implements ChatModel {
  readonly requests: ChatRequest[] = [];
  constructor(private readonly replies: AssistantMessage[]) {}
  complete(request: ChatRequest): Promise<AssistantMessage> {
    this.requests.push(request);
    const next = this.replies[this.requests.length - 1];
    if (!next) return Promise.reject(new Error('unscripted model call'));
    return Promise.resolve(next);
  }
}

/** A runner on `store` with the shared test key: `options` add to or replace those two. */
export function runnerOn(
  store: CheckpointStore,
  registry: ToolRegistry,
  options: Partial<FlowRunnerOptions> = {},
): FlowRunner {
  return new FlowRunner(new Executor(registry), {
    checkpoints: store,
    checkpointKey: KEY,
    ...options,
  });
}

/** The specs read sealed call bodies under these short names. */
export {
  unverifiedBody as bodyOf,
  decodeCall as decode,
} from 'agent-adapter/testing';

/** A store for one test, and how to be rid of it. */
interface SpecStore {
  store: CheckpointStore;
  done: () => Promise<void>;
}

/** Registers hooks that hand `use` a fresh store before each test and dispose of it after. */
export type FreshStoreEach = (use: (store: CheckpointStore) => void) => void;

/**
 * The two stores the runner's specs run on, for `describe.each`: memory, and SQLite in a fresh
 * temp directory (removed after each test). Each row's second item, called in the describe
 * body, gives every test of it a fresh store of that kind.
 */
export function memoryAndSqlite(
  prefix: string,
): Array<[string, FreshStoreEach]> {
  const makers: Array<[string, () => SpecStore]> = [
    [
      'memory',
      () => ({
        store: new MemoryCheckpointStore(),
        done: async () => undefined,
      }),
    ],
    [
      'SQLite',
      () => {
        const dir = mkdtempSync(join(tmpdir(), `aa-${prefix}-`));
        const store = new SQLiteCheckpointStore(join(dir, 'runs.db'));
        return {
          store,
          done: async () => {
            await store.close();
            rmSync(dir, { recursive: true, force: true });
          },
        };
      },
    ],
  ];
  return makers.map(([name, make]) => [name, (use) => freshEach(make, use)]);
}

function freshEach(
  make: () => SpecStore,
  use: (store: CheckpointStore) => void,
): void {
  let done: (() => Promise<void>) | undefined;
  beforeEach(() => {
    const made = make();
    done = made.done;
    use(made.store);
  });
  afterEach(() => done?.());
}
