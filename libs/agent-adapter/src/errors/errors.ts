import { DurableError } from './durable.error';
import { Messages } from './messages';

/*
 * The core's errors (naming rule: see DurableError). Misuse found when something is built (options,
 * tool registration, store and model construction) is DurableSetupError; a flow definition's is
 * FlowError. A wrong argument at call time (a run id, a ctx field, a resume decision, chat
 * messages, a redis run id with braces) stays a plain TypeError on purpose: it is the caller's bug
 * at that call, the way a built-in reports one, it is thrown before anything is read or written,
 * and callers (run-id-arg in the CLI) rely on `instanceof TypeError` to tell it from a store error.
 * An error's data fields are its constructor's `readonly` parameters: each is declared and set once.
 */

/**
 * The run's owner may be alive: its lease has not expired. `recoverAll` reports such runs instead
 * of taking them; try again after `until` (epoch ms), or force it if that worker is gone.
 * @publicApi
 */
export class RunLeaseHeld extends DurableError {
  constructor(
    runId: string,
    readonly owner: string,
    readonly until: number,
  ) {
    super(Messages.leaseHeld(runId, owner, until), runId);
  }
}

/**
 * This worker is shutting down (`FlowRunner.drain`): the run stopped at a superstep boundary, its
 * latest checkpoint stored and its lease released, so another worker takes it over at once.
 * Nothing is lost or run twice. @publicApi
 */
export class WorkerDraining extends DurableError {
  constructor(
    runId: string,
    readonly worker: string,
    readonly step: number,
  ) {
    super(Messages.workerDraining(runId, worker, step), runId);
  }
}

/**
 * The run waits on its queue (`enqueue`): only an admission under the queue's limits starts it,
 * so `recover` does not. Leave it to the queue, or cancel it. @publicApi
 */
export class RunQueued extends DurableError {
  constructor(
    runId: string,
    readonly queue: string,
  ) {
    super(Messages.runQueued(runId, queue), runId);
  }
}

/** Nothing is stored for the run id. @publicApi */
export class CheckpointNotFound extends DurableError {
  constructor(runId: string, message = Messages.notFound(runId)) {
    super(message, runId);
  }
}

/**
 * A compare-and-set lost: another worker holds the run, it ended, it is another flow's, or this
 * worker's segment was cut off (fenced). The loser has run nothing after the refused write.
 * @publicApi
 */
export class CheckpointConflict extends DurableError {
  constructor(message: string, runId: string) {
    super(message, runId);
  }
}

/**
 * A stored row is unreadable, its signature does not match, or a call record is missing. A row
 * signed with a key id the reader's key ring does not hold has `unknownKeyId`: the ring may be the
 * wrong one (recovery refuses it all the same). @publicApi
 */
export class CheckpointStoreCorrupt extends DurableError {
  readonly unknownKeyId?: string;

  constructor(message: string, runId: string, unknownKeyId?: string) {
    super(message, runId);
    if (unknownKeyId !== undefined) this.unknownKeyId = unknownKeyId;
  }
}

/** A call is in doubt and its tool is not idempotent. `calls` are `[tool, why]` pairs. @publicApi */
export class RecoveryNeedsDecision extends DurableError {
  constructor(
    runId: string,
    readonly calls: ReadonlyArray<readonly [tool: string, why: string]>,
    message = Messages.needsDecision(runId, calls),
  ) {
    super(message, runId);
  }
}

/**
 * The run was last written by a Redis master that has since been replaced by a promoted replica
 * (`lostHistory` was the old master's replication id, `history` is the new one's): writes the old
 * master acknowledged but had not replicated may be gone, among them a call's `started` whose tool
 * ran, which recovery would run again. Refused before anything is written, like any call in doubt
 * (`calls` holds only the calls in doubt the store still has: which were lost cannot be known).
 * Mark the run restored (`runs restored --failover`: every call it may have lost is then in doubt,
 * for a decision each), cancel it, or recover it with `rerunInDoubt`. Not raised for writes a store
 * made with `replicas` (WAIT). @publicApi
 */
export class FailoverNeedsDecision extends RecoveryNeedsDecision {
  constructor(
    runId: string,
    readonly lostHistory: string,
    readonly history: string,
    /** Calls the store still holds in doubt besides (a refused write names none). */
    calls: ReadonlyArray<readonly [tool: string, why: string]> = [],
  ) {
    super(
      runId,
      calls,
      Messages.failoverMayHaveLost(runId, lostHistory, history, calls.length),
    );
  }
}

/** The graph is invalid, changed since the checkpoint, or a node broke a rule of the flow. @publicApi */
export class FlowError extends DurableError {
  constructor(message: string, runId?: string) {
    super(message, runId);
  }
}

/** A ctx for someone other than the run's own identity, or a missing principal. @publicApi */
export class RunAccessDenied extends DurableError {
  constructor(runId: string, why: string) {
    super(Messages.accessDenied(runId, why), runId);
  }
}

/** One class-validator violation: the property path and the failed constraints' messages. */
export interface StateViolation {
  path: string;
  messages: string[];
}

/** Input state refused by the flow's state class, with every violation named. @publicApi */
export class InvalidFlowState extends FlowError {
  constructor(
    flow: string,
    readonly violations: StateViolation[],
  ) {
    super(Messages.invalidState(flow, violations));
  }
}

/**
 * A tool threw. Inside a run the node always sees this wrapper, on the first run and when the
 * error replays after a recovery, so node code behaves the same both times.
 * `errorName`/`message` are the original error's; `cause` is the original on the first run only.
 * @publicApi
 */
export class ToolFailed extends DurableError {
  constructor(
    readonly tool: string,
    readonly errorName: string,
    message: string,
    runId: string,
    readonly replayed: boolean,
    cause?: unknown,
  ) {
    super(message, runId, cause === undefined ? undefined : { cause });
  }
}

/**
 * Thrown into a node whose call waits for an approval: the superstep pauses the run (whether or
 * not the node catches it). Not an error of the run.
 */
export class RunPaused extends DurableError {
  constructor(runId: string, tool: string) {
    super(Messages.paused(runId, tool), runId);
  }
}

/**
 * Thrown into a node that sleeps (`ctx.sleep`, `ctx.sleepUntil`): the superstep puts the run to
 * sleep (whether or not the node catches it) and it goes on at `wakeAt`. Not an error of the run.
 */
export class RunSleeping extends DurableError {
  constructor(
    runId: string,
    node: string,
    readonly wakeAt: number,
  ) {
    super(Messages.sleeping(runId, node, wakeAt), runId);
  }
}

/**
 * The run's error when a call's approval deadline passed with no decision and its tool says
 * `onTimeout: 'fail'`: the clock ended the run. @publicApi
 */
export class ApprovalTimedOut extends DurableError {
  constructor(
    runId: string,
    readonly tool: string,
    readonly deadline: number,
  ) {
    super(Messages.approvalTimedOut(tool, deadline), runId);
  }
}

/** A tool call that needed approval was denied. A node may catch it; else the run fails. @publicApi */
export class ToolDenied extends ToolFailed {}

/**
 * A tool call took longer than its `timeoutMs`. The tool was not stopped and may still be running:
 * for a tool that is not idempotent the call is recorded in doubt (a recovery of its superstep
 * stops for a decision); for an idempotent one the timeout is the call's sealed error.
 * @publicApi
 */
export class ToolTimeout extends ToolFailed {}

/** A value could not be turned into canonical JSON (a function, a Date, a cycle, NaN, ...). */
export class UnsealableValue extends DurableError {
  constructor(
    readonly path: string,
    why: string,
  ) {
    super(Messages.unsealable(path, why));
  }
}

/** The checkpoint key is missing, too short or unknown. */
export class CheckpointKeyError extends DurableError {}

/**
 * The library is set up wrong: a runner's or the durable module's options, a request-scoped flow or
 * tool, duplicate names. Thrown when the runner is built or the application boots, before anything
 * is stored; the message names the option, class or method. @publicApi
 */
export class DurableSetupError extends DurableError {}

/** An optional package that a feature in use needs and that is not installed. @publicApi */
export interface MissingPackage {
  /** The package's name, as `require()` is given it. */
  readonly name: string;
  /** What `npm install` is given for it: the name, with a major where one matters (`better-sqlite3@12`). */
  readonly install: string;
  /** What needs it: the store, a flow's state class, a tool's arguments. */
  readonly neededFor: readonly string[];
}

/**
 * Optional packages that the features in use need are not installed (a store's driver, the
 * validation packages of a state class, ...). One error names every missing package, and its
 * message ends with the one npm command that installs them all.
 * @publicApi
 */
export class DriverNotInstalledError extends DurableError {
  /** The missing packages' names. */
  readonly packages: readonly string[];
  /** Each missing package with what needs it. */
  readonly missing: readonly MissingPackage[];
  /** The command that installs every missing package: `npm install typeorm better-sqlite3@12`. */
  readonly command: string;

  /**
   * `context` is what was being set up (`SQLiteCheckpointStore`, `DurableModule`); `missing` the
   * package (or packages) it needs.
   */
  constructor(
    context: string,
    missing: string | ReadonlyArray<string | MissingPackage>,
  ) {
    const list = (typeof missing === 'string' ? [missing] : missing).map(
      (pkg): MissingPackage =>
        typeof pkg === 'string'
          ? { name: pkg, install: pkg, neededFor: [] }
          : pkg,
    );
    const command = Messages.installCommand(list.map((pkg) => pkg.install));
    super(Messages.packagesMissing(context, list, command));
    this.packages = list.map((pkg) => pkg.name);
    this.missing = list;
    this.command = command;
  }
}

/**
 * A store cannot be reached, or its tables are not the ones this version uses. `transient`: the
 * store failed in a way that may pass (a dropped connection, a lock held past the busy timeout, a
 * failover), so a write's outcome is unknown and the writer may find it out and try again.
 * @publicApi
 */
export class CheckpointStoreUnavailable extends DurableError {
  readonly transient: boolean;

  constructor(
    message: string,
    runId?: string,
    options?: { cause?: unknown; transient?: boolean },
  ) {
    super(message, runId, options);
    this.transient = options?.transient === true;
  }
}

/**
 * A dead letter: the run was recovered `maxRecoveryAttempts` times without completing a
 * superstep, so the next `recover` parked it as `failed` instead of claiming it again. Not thrown:
 * it is the parked run's sealed `error` (`result.error.name === RecoveryAttemptsExceeded.name`).
 * Find out why its workers stop there (`runs inspect`), then fork it (`runs fork`).
 * @publicApi
 */
export class RecoveryAttemptsExceeded extends DurableError {
  constructor(
    runId: string,
    readonly recoveries: number,
    readonly superstep: number,
  ) {
    super(Messages.parked(runId, recoveries, superstep), runId);
  }
}

/**
 * An operator cancelled the run (`npx agent-adapter runs cancel`): it ended `failed` with a sealed
 * checkpoint that fences the worker driving it. Not thrown: it is the cancelled run's sealed
 * `error` (`result.error.name === RunCancelled.name`).
 * @publicApi
 */
export class RunCancelled extends DurableError {
  readonly by: string;
  readonly reason?: string;

  constructor(runId: string, by: string, reason?: string) {
    super(Messages.cancelled(by, reason), runId);
    this.by = by;
    if (reason !== undefined) this.reason = reason;
  }
}

/**
 * A `@Tool({ args: Dto })` method was called with arguments its DTO refuses. The method did not
 * run and nothing was logged. `violations` names every one. Thrown by the Nest layer; the class is
 * framework-free, so both entries export it.
 * @publicApi
 */
export class InvalidToolArguments extends DurableError {
  constructor(
    readonly tool: string,
    readonly violations: StateViolation[],
  ) {
    super(Messages.invalidToolArguments(tool, violations));
  }
}
