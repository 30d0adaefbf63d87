import { hostname } from 'node:os';
import { join, resolve } from 'node:path';

/** A key for trying the example only: anyone who reads this file can forge its checkpoints. */
export const DEVELOPMENT_KEY = 'development-only-key-change-me-32b';

/** The example's settings, read from the environment once at bootstrap. */
export interface ExampleConfig {
  /**
   * Holds runs.db (the SQLite store), ledger.log, outbox/ (the mail provider) and payments/ (the
   * payment provider). `DATA_DIR`, default `data`.
   */
  dataDir: string;
  /** `PORT`, default 3000 (0 picks a free one). */
  port: number;
  /** `CHECKPOINT_KEY`; the development key (with a warning) when unset. */
  checkpointKey: string;
  /** True when `CHECKPOINT_KEY` is unset. */
  usingDevelopmentKey: boolean;
  /** `WORKER_ID`, this worker's name in run leases (and in the ledger). */
  workerId: string;
  /** `LEASE_MS`: how long a dead worker's runs stay owned. Default 15000. */
  leaseMs: number;
  /** `CRASH_IN=<tool>`: the process is SIGKILLed inside that tool, after it acted (demo/tests). */
  crashIn?: string;
  /** `CRASH_BEFORE=<tool>`: SIGKILLed inside that tool before it acted (demo/tests). */
  crashBefore?: string;
  /** `TOOL_DELAY_MS`: each tool takes this long (a slow API, for the demo and the tests). */
  toolDelayMs: number;
  /** `TOOL_GATE=<file>`: each tool waits until that file exists (tests hold a run mid-way). */
  toolGate?: string;
  /**
   * The support agent's model: an OpenAI-compatible server when `OPENAI_BASE_URL` is set (with
   * `OPENAI_MODEL`, default `gpt-4o-mini`, and `OPENAI_API_KEY`), else a scripted model.
   */
  openai?: { baseUrl: string; model: string; apiKey?: string };
}

export const EXAMPLE_CONFIG = Symbol('EXAMPLE_CONFIG');

export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
): ExampleConfig {
  const key = env.CHECKPOINT_KEY;
  return {
    dataDir: resolve(env.DATA_DIR ?? 'data'),
    port: integer(env, 'PORT', 3000, 0),
    checkpointKey: key ?? DEVELOPMENT_KEY,
    usingDevelopmentKey: key === undefined,
    workerId: env.WORKER_ID ?? `${hostname()}:${process.pid}`,
    leaseMs: integer(env, 'LEASE_MS', 15_000, 1),
    ...(env.CRASH_IN && { crashIn: env.CRASH_IN }),
    ...(env.CRASH_BEFORE && { crashBefore: env.CRASH_BEFORE }),
    toolDelayMs: integer(env, 'TOOL_DELAY_MS', 0, 0),
    ...(env.TOOL_GATE && { toolGate: env.TOOL_GATE }),
    ...(env.OPENAI_BASE_URL && {
      openai: {
        baseUrl: env.OPENAI_BASE_URL,
        model: env.OPENAI_MODEL ?? 'gpt-4o-mini',
        ...(env.OPENAI_API_KEY && { apiKey: env.OPENAI_API_KEY }),
      },
    }),
  };
}

export const runsDb = (config: ExampleConfig) =>
  join(config.dataDir, 'runs.db');

function integer(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) {
    throw new Error(
      `${name}=${JSON.stringify(raw)} is not valid: give a whole number ≥ ${min}.`,
    );
  }
  return value;
}
