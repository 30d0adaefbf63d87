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
  MemoryCheckpointStore,
  SQLiteCheckpointStore,
  type AssistantMessage,
  type ChatModel,
  type ChatRequest,
  type CheckpointStore,
  type FlowRunnerOptions,
  type ToolRegistry,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';

export { KEY };

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

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

/** A store for one spec, and how to be rid of it. */
export interface SpecStore {
  store: CheckpointStore;
  done: () => Promise<void>;
}

/**
 * The two stores the runner's specs run on, for `describe.each`: memory, and SQLite in a fresh
 * temp directory (removed by `done`).
 */
export function memoryAndSqlite(
  prefix: string,
): Array<[string, () => SpecStore]> {
  return [
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
}
