import { CheckpointKeyError, DurableSetupError } from '../../errors';
import { Messages } from '../../errors/messages';
import { DurableEvents } from '../../events/durable.events';
import type { ApprovalPort } from '../../exec/approvals';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import { MemoryCheckpointStore } from '../../exec/checkpoints/memory.store';
import { KeyRing, type CheckpointKey } from '../../exec/durable/key-ring';
import type { PendingApproval, RunIdentity } from '../../exec/durable/records';
import type { ResumeDecision } from '../flow.interfaces';
import { consoleLogger, type DurableLogger } from '../../observability/logger';
import { workerIdOf } from '../worker-id';
import { StreamBell } from '../../exec/stream-bell';

const DEFAULT_STREAM_RETENTION = 10_000;
import {
  QUEUE_NAME,
  type QueueLimits,
  type QueueOptions,
} from './queue-limits';

/**
 * The runner's options: the one place they are declared, checked and defaulted. The tool loop
 * takes them as they are; the Nest module's options derive from them and are checked here too.
 */

/** How long a run stays owned after its worker's last sign of life, unless told. */
export const DEFAULT_LEASE_MS = 15_000;
/** The shortest lease: renewals go out every third of it. */
export const MIN_LEASE_MS = 100;

/** @publicApi */
export interface FlowRunnerOptions {
  /** Where checkpoints and call logs go. @default new MemoryCheckpointStore() */
  checkpoints?: CheckpointStore;
  /**
   * Signs every checkpoint and call record: one secret of at least 32 bytes, or a key ring for
   * rotation. The same on every worker. Required for every store but the memory one.
   */
  checkpointKey?: CheckpointKey;
  /**
   * Encrypts at rest (AES-256-GCM) what records hold of the run's data (state, pending approvals,
   * call arguments, results and errors) before they are sealed, so a database reader sees none of
   * it. One secret of at least 32 bytes or a key ring (current + previous, for rotation); the same
   * on every worker. Not the checkpoint key. @default no encryption
   */
  encryptionKey?: CheckpointKey;
  /** Receives `checkpoint.saved`, `run.recovered` and `run.decided`. */
  events?: DurableEvents;
  /**
   * Where the runner reports what it cannot throw (a failed lease renewal, a listener that threw;
   * also the default events' listener errors). The Nest module gives Nest's `Logger`.
   * @default the console
   */
  logger?: DurableLogger;
  /**
   * This worker's id in run leases; a stable id lets a restarted worker take its runs back at once.
   * @default `${hostname}:${pid}:${random}`
   */
  workerId?: string;
  /** How long a run stays owned after this worker's last sign of life (at least 100). @default 15000 */
  leaseMs?: number;
  /**
   * A synchronous approver (for CLIs and tests): a call that needs approval awaits it inside the
   * call instead of pausing the run. A crash while it decides leaves the call in doubt.
   * @default none: such a call pauses the run until `resume`
   */
  approvals?: ApprovalPort;
  /**
   * Lets someone other than the run's own identity resume it (an approver, an operator). Asked
   * only when `resume` is given a ctx that is not the run's; only `true` allows it. The run keeps
   * its own identity either way.
   * @default none: only the run's own identity may resume it
   */
  canResume?: ResumePolicy;
  /**
   * Dead letters: a run recovered this many times without completing a superstep (it keeps
   * killing or losing its worker at the same point) is not claimed again. The next `recover`
   * parks it as `failed` (error `RecoveryAttemptsExceeded`, a sealed checkpoint written with a
   * compare-and-set) and returns that result; `recoverAll` reports it like any result. Completing
   * a superstep resets the count.
   * @default none: recovered every time
   */
  maxRecoveryAttempts?: number;
  /**
   * Queues' flow control, by queue name (see `enqueue`): the same on every worker. A worker's
   * takeover admits from these queues and from each of its flows' own queue (named after the
   * flow; without limits unless named here).
   * @default none
   */
  queues?: Readonly<Record<string, QueueOptions>>;
  /**
   * How many entries of a run's stream (`ctx.publish`) are kept: older ones are dropped as newer
   * ones come (never those of the superstep running). At least 1.
   * @default 10000
   */
  streamRetention?: number;
}

/** What a resume policy is asked. @publicApi */
export interface ResumeRequest {
  readonly runId: string;
  readonly flow: string;
  /** The identity sealed into the run. */
  readonly run: Readonly<RunIdentity>;
  /** The ctx `resume` was given. */
  readonly requester: Readonly<RunIdentity>;
  /** The call the run waits for. */
  readonly pending: Readonly<PendingApproval>;
  readonly decision: Readonly<ResumeDecision>;
}

/** Allows (`true`) a requester that is not the run's identity to resume it. @publicApi */
export type ResumePolicy = (
  request: ResumeRequest,
) => boolean | Promise<boolean>;

/** The options checked, defaulted and built into what the runner works with. */
export interface RunnerSettings {
  store: CheckpointStore;
  /** Seals and opens records (with the encryption key, when one is given). */
  ring: KeyRing;
  events: DurableEvents;
  logger: DurableLogger;
  workerId: string;
  leaseMs: number;
  approvals?: ApprovalPort;
  canResume?: ResumePolicy;
  maxRecoveryAttempts?: number;
  /** The queues' limits by name. */
  queues: ReadonlyMap<string, QueueLimits>;
  /** Run streams: entries kept per run, and the bell readers in this process wait on. */
  streams: { keep: number; bell: StreamBell };
}

/**
 * How the caller names the options, for messages: the Nest module calls the store `store` and the
 * key `key`, and its errors start with `DurableModule:`.
 */
export interface OptionNames {
  readonly owner: string;
  readonly checkpointKey: string;
}

const RUNNER_NAMES: OptionNames = {
  owner: 'FlowRunner',
  checkpointKey: 'checkpointKey',
};

// A memory store without a key gets one random key, shared by every runner on that store.
const ephemeralKeys = new WeakMap<CheckpointStore, KeyRing>();

/**
 * Checks every option and applies the defaults. Throws `DurableSetupError` naming the option (a
 * key that is too short or reused is `CheckpointKeyError`), before anything is stored.
 */
export function normalizeRunnerOptions(
  options: FlowRunnerOptions = {},
  names: OptionNames = RUNNER_NAMES,
): RunnerSettings {
  const setup = (message: string) =>
    new DurableSetupError(Messages.ofOwner(names.owner, message));
  const store = options.checkpoints ?? new MemoryCheckpointStore();
  let workerId: string;
  try {
    workerId = workerIdOf(options.workerId);
  } catch (error) {
    throw setup((error as Error).message);
  }
  const leaseMs = integerOption(
    'leaseMs',
    options.leaseMs,
    DEFAULT_LEASE_MS,
    MIN_LEASE_MS,
    names,
  );
  const maxRecoveryAttempts =
    options.maxRecoveryAttempts === undefined
      ? undefined
      : integerOption(
          'maxRecoveryAttempts',
          options.maxRecoveryAttempts,
          1,
          1,
          names,
        );
  if (
    options.approvals !== undefined &&
    typeof options.approvals?.decide !== 'function'
  ) {
    throw setup(Messages.badApprovals());
  }
  const logger = options.logger ?? consoleLogger;
  if (
    typeof logger?.warn !== 'function' ||
    typeof logger.error !== 'function'
  ) {
    throw setup(Messages.badLogger());
  }
  if (
    options.canResume !== undefined &&
    typeof options.canResume !== 'function'
  ) {
    throw setup(Messages.badCanResume());
  }
  let ring: KeyRing;
  if (options.checkpointKey !== undefined && options.checkpointKey !== null) {
    ring = KeyRing.from(options.checkpointKey);
  } else if (store.shared) {
    throw new CheckpointKeyError(
      Messages.keyRequired(
        names.owner,
        store.constructor.name,
        names.checkpointKey,
      ),
    );
  } else {
    ring = ephemeralKeys.get(store) ?? KeyRing.ephemeral();
    ephemeralKeys.set(store, ring);
  }
  if (options.encryptionKey !== undefined && options.encryptionKey !== null)
    ring = ring.withEncryption(options.encryptionKey); // its keys must differ
  return {
    store,
    ring,
    events:
      options.events ??
      new DurableEvents((error, event) =>
        logger.error(Messages.listenerThrew(event), error),
      ),
    logger,
    workerId,
    leaseMs,
    ...(options.approvals && { approvals: options.approvals }),
    ...(options.canResume && { canResume: options.canResume }),
    ...(maxRecoveryAttempts !== undefined && { maxRecoveryAttempts }),
    queues: queueLimits(options.queues, names),
    streams: {
      keep: integerOption(
        'streamRetention',
        options.streamRetention,
        DEFAULT_STREAM_RETENTION,
        1,
        names,
      ),
      bell: new StreamBell(),
    },
  };
}

/**
 * An integer option of at least `min`, or its default when absent: `DurableSetupError` naming the
 * option otherwise (the Nest module checks its own numbers with it too).
 */
export function integerOption(
  option: string,
  value: unknown,
  fallback: number,
  min: number,
  names: Pick<OptionNames, 'owner'> = RUNNER_NAMES,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min)
    throw new DurableSetupError(
      Messages.ofOwner(names.owner, Messages.badInteger(option, min, value)),
    );
  return value;
}

/**
 * The one check of the runner's `queues` option (the Nest module's too): each queue's name and
 * limits, named in the error, before anything is stored.
 */
export function queueLimits(
  queues: Readonly<Record<string, QueueOptions>> | undefined,
  names: Pick<OptionNames, 'owner'>,
): Map<string, QueueLimits> {
  const out = new Map<string, QueueLimits>();
  for (const [name, options] of Object.entries(queues ?? {})) {
    if (!QUEUE_NAME.test(name))
      throw new DurableSetupError(
        Messages.ofOwner(names.owner, Messages.badQueueName(name)),
      );
    const option = (field: string) => `queues.${name}.${field}`;
    const positive = (field: string, value: unknown) =>
      value === undefined
        ? undefined
        : integerOption(option(field), value, 1, 1, names);
    const concurrency = positive('concurrency', options?.concurrency);
    const perKey = positive('perKey', options?.perKey);
    const rate = options?.rateLimit;
    if (rate !== undefined && (typeof rate !== 'object' || rate === null))
      throw new DurableSetupError(
        Messages.ofOwner(names.owner, Messages.badRateLimit(name)),
      );
    out.set(name, {
      name,
      ...(concurrency !== undefined && { concurrency }),
      ...(perKey !== undefined && { perKey }),
      ...(rate !== undefined && {
        rate: {
          limit: integerOption(
            option('rateLimit.limit'),
            rate.limit ?? 0,
            1,
            1,
            names,
          ),
          intervalMs: integerOption(
            option('rateLimit.intervalMs'),
            rate.intervalMs ?? 0,
            1,
            1,
            names,
          ),
        },
      }),
    });
  }
  return out;
}
