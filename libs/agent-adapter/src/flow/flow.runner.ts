import { randomBytes, randomInt } from 'node:crypto';
import pLimit from 'p-limit';
import {
  CheckpointConflict,
  CheckpointKeyError,
  CheckpointNotFound,
  RunLeaseHeld,
  FlowError,
  RecoveryAttemptsExceeded,
  RecoveryNeedsDecision,
  RunAccessDenied,
} from '../errors';
import { Messages } from '../errors/messages';
import { DurableEvents } from '../events/durable.events';
import {
  nodeStorage,
  type NodeScope,
  type SuperstepScope,
} from '../exec/call-context';
import type {
  CheckpointStore,
  RunHead,
  SaveOptions,
} from '../exec/checkpoints/checkpoint-store';
import { MemoryCheckpointStore } from '../exec/checkpoints/memory.store';
import {
  assertHeadSegment,
  assertLogCount,
  assertNoGaps,
  CallLog,
} from '../exec/durable/call-log';
import type { CanonicalText } from '../exec/durable/canonical-json';
import { KeyRing, type CheckpointKey } from '../exec/durable/key-ring';
import { traced } from '../observability/tracing';
import {
  openCall,
  openCheckpoint,
  sealCheckpoint,
  type Checkpoint,
  type PendingApproval,
  type RunIdentity,
  type SealedError,
} from '../exec/durable/records';
import { ReplayBook } from '../exec/durable/replay';
import type { Executor } from '../exec/executor';
import type { ApprovalPort } from '../exec/approvals';
import type { Flow } from './flow.builder';
import type { CompiledFlow } from './flow.graph';
import type {
  NodeContext,
  RecoverAllOptions,
  RecoverOptions,
  RecoveryOutcome,
  ResumeDecision,
  ResumeOptions,
  RunOptions,
  RunResult,
} from './flow.interfaces';
import { checkRunId } from './run-id';
import { workerIdOf } from './worker-id';
import { mergeEncoded, nextFrontier } from './superstep';

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
  /** Receives `checkpoint.saved` and `run.recovered`. */
  events?: DurableEvents;
  /** This worker's id in run leases. @default `${hostname}:${pid}:${random}` */
  workerId?: string;
  /** How long a run stays owned after this worker's last sign of life. @default 15000 */
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

/** Unfinished runs listed per store read in `recoverEach`. */
const RECOVER_PAGE_SIZE = 100;

// A memory store without a key gets one random key, shared by every runner on that store.
const ephemeralKeys = new WeakMap<CheckpointStore, KeyRing>();

/**
 * Runs flows durably: a signed checkpoint after every superstep, every tool call logged before and
 * after it runs, recovery that replays finished calls and fails closed on calls in doubt.
 * @publicApi
 */
export class FlowRunner {
  readonly store: CheckpointStore;
  readonly events: DurableEvents;
  readonly workerId: string;
  private readonly ring: KeyRing;
  private readonly leaseMs: number;

  /** The key ring this runner seals and opens records with (operators' tools read with it). */
  get keyRing(): KeyRing {
    return this.ring;
  }

  private readonly approvals?: ApprovalPort;
  private readonly canResume?: ResumePolicy;
  private readonly maxRecoveryAttempts?: number;
  /** Runs this worker is driving right now (their leases are renewed), with how many drives. */
  private readonly driving = new Map<string, number>();
  private renewTimer?: NodeJS.Timeout;
  private renewing = false;
  private closed = false;

  constructor(
    readonly executor: Executor,
    options: FlowRunnerOptions = {},
  ) {
    this.store = options.checkpoints ?? new MemoryCheckpointStore();
    this.events = options.events ?? new DurableEvents();
    this.workerId = workerIdOf(options.workerId);
    this.leaseMs = options.leaseMs ?? 15_000;
    if (!Number.isInteger(this.leaseMs) || this.leaseMs < 100) {
      throw new TypeError(
        `leaseMs must be an integer of at least 100 (milliseconds), got ${String(options.leaseMs)}.`,
      );
    }
    if (
      options.approvals !== undefined &&
      typeof options.approvals?.decide !== 'function'
    ) {
      throw new TypeError(
        'approvals must be an ApprovalPort: an object with a decide(request) method.',
      );
    }
    if (
      options.canResume !== undefined &&
      typeof options.canResume !== 'function'
    ) {
      throw new TypeError(
        'canResume must be a function (request) => boolean | Promise<boolean>.',
      );
    }
    if (options.maxRecoveryAttempts !== undefined) {
      const max = options.maxRecoveryAttempts;
      if (!Number.isSafeInteger(max) || max < 1) {
        throw new TypeError(
          `maxRecoveryAttempts must be a positive integer, got ${String(max)}.`,
        );
      }
      this.maxRecoveryAttempts = max;
    }
    if (options.approvals) this.approvals = options.approvals;
    if (options.canResume) this.canResume = options.canResume;
    if (options.checkpointKey !== undefined && options.checkpointKey !== null) {
      this.ring = KeyRing.from(options.checkpointKey);
    } else if (this.store.shared) {
      throw new CheckpointKeyError(
        Messages.keyRequired(this.store.constructor.name),
      );
    } else {
      let ring = ephemeralKeys.get(this.store);
      if (!ring) ephemeralKeys.set(this.store, (ring = KeyRing.ephemeral()));
      this.ring = ring;
    }
    if (options.encryptionKey !== undefined && options.encryptionKey !== null)
      this.ring = this.ring.withEncryption(options.encryptionKey);
  }

  /** Starts a run and drives it until it ends, pauses, or this worker loses it. */
  async run<S extends object>(
    flow: Flow<S>,
    input: Partial<NoInfer<S>>,
    options: RunOptions = {},
  ): Promise<RunResult<S>> {
    const compiled = flow.compile();
    const state = compiled.state.encode(await compiled.state.fromInput(input));
    const runId = options.runId ?? randomBytes(16).toString('hex');
    checkRunId(runId);
    const incarnation = randomInt(1, 2 ** 30);
    const cp: Checkpoint = {
      runId,
      step: 0,
      flow: compiled.name,
      status: 'running',
      segment: incarnation,
      incarnation,
      logBefore: 0,
      kind: compiled.kind,
      superstep: 0,
      state,
      frontier: compiled.starts,
      visits: {},
      digest: compiled.digest,
      identity: identityOf(options.ctx),
      idemKid: this.ring.current.id,
      reason: 'start',
    };
    await this.save(cp);
    return this.drive(
      compiled,
      cp,
      new CallLog(this.store, this.ring, runId, cp.segment, cp.incarnation),
    );
  }

  /**
   * Goes on with a run from its latest checkpoint: the superstep that was cut short runs again,
   * finished calls replay, calls in doubt fail closed unless their tool is idempotent or
   * `rerunInDoubt` is set. A paused run is returned as it is.
   */
  async recover<S extends object>(
    flow: Flow<S>,
    runId: string,
    options: RecoverOptions = {},
  ): Promise<RunResult<S>> {
    checkRunId(runId);
    return this.recoverRun(flow, runId, options, false);
  }

  /** `recover`; with `unlessHeld`, a run whose owner's lease is live is `RunLeaseHeld`, not taken. */
  private async recoverRun<S extends object>(
    flow: Flow<S>,
    runId: string,
    options: RecoverOptions,
    unlessHeld: boolean,
  ): Promise<RunResult<S>> {
    const compiled = flow.compile();
    const { head, cp, identity } = await this.readLatest(
      compiled,
      runId,
      options.ctx,
    );
    const held = unlessHeld && this.leaseHeld(head, Date.now());
    if (held) throw held;
    if (cp.status === 'paused') return this.result(compiled, cp);
    const recoveries = cp.recoveries ?? 0;
    if (
      this.maxRecoveryAttempts !== undefined &&
      recoveries >= this.maxRecoveryAttempts
    ) {
      return this.park(compiled, cp, head.calls, recoveries);
    }
    const { calls, book } = await this.readCutSuperstep(
      cp,
      head,
      options.rerunInDoubt,
    );

    // The claim: one racing recoverer wins this step, the other gets CheckpointConflict here.
    // (A forked run adopts this graph here: readLatest let its digest differ.)
    const claim: Checkpoint = {
      ...cp,
      identity,
      step: cp.step + 1,
      segment: cp.segment + 1,
      reason: 'claim',
      digest: compiled.digest,
      recoveries: recoveries + 1,
    };
    await this.save(claim, [], {}, head.calls);
    return this.drive(
      compiled,
      claim,
      new CallLog(
        this.store,
        this.ring,
        runId,
        claim.segment,
        claim.incarnation,
      ),
      { book, seen: calls.length, recovered: true },
    );
  }

  /**
   * Dead letter: ends the run as `failed` instead of claiming it again, with a compare-and-set
   * (a worker still driving it is fenced; a call it logged meanwhile makes this conflict).
   */
  private async park<S extends object>(
    compiled: CompiledFlow<S>,
    cp: Checkpoint,
    expectCalls: number,
    recoveries: number,
  ): Promise<RunResult<S>> {
    const parked: Checkpoint = {
      ...cp,
      step: cp.step + 1,
      segment: cp.segment + 1,
      status: 'failed',
      reason: 'parked',
      error: sealError(
        new RecoveryAttemptsExceeded(cp.runId, recoveries, cp.superstep),
      ),
    };
    await this.save(parked, [], {}, expectCalls);
    return this.result(compiled, parked);
  }

  /**
   * Decides the call a paused run waits for, and goes on. The decision is sealed into the next
   * checkpoint with a compare-and-set (of two resumes at once, one wins; the other gets
   * CheckpointConflict) and only then spent: a crash before that save leaves the run paused, a
   * crash after it is recovered by spending the stored decision. An approved call runs once; a
   * denied one gives the node `ToolDenied`.
   */
  async resume<S extends object>(
    flow: Flow<S>,
    runId: string,
    decision: ResumeDecision,
    options: ResumeOptions = {},
  ): Promise<RunResult<S>> {
    checkRunId(runId);
    if (typeof decision?.approved !== 'boolean') {
      throw new TypeError(
        'resume(flow, runId, decision): decision.approved must be true or false.',
      );
    }
    const compiled = flow.compile();
    const { head, cp, identity } = await this.readLatest(
      compiled,
      runId,
      options.ctx,
      (cp, requester) => {
        // Rerunning calls in doubt (a charge that may have happened) is the run's own call, or an
        // operator's through recover: a requester the policy lets decide does not get to make it.
        if (options.rerunInDoubt)
          throw new RunAccessDenied(Messages.strangerRerun(runId), runId);
        return this.mayResume(cp, requester, decision);
      },
    );
    if (cp.status !== 'paused' || !cp.pending) {
      throw new CheckpointConflict(Messages.notPaused(runId, cp.status), runId);
    }
    const { calls, book } = await this.readCutSuperstep(
      cp,
      head,
      options.rerunInDoubt,
    );
    const { args: _args, ...call } = cp.pending;
    const next: Checkpoint = {
      ...cp,
      identity,
      step: cp.step + 1,
      segment: cp.segment + 1,
      status: 'running',
      reason: 'resume',
      pending: undefined,
      decisions: [
        ...(cp.decisions ?? []),
        {
          ...call,
          approved: decision.approved,
          ...(decision.by !== undefined && { by: String(decision.by) }),
          ...(decision.reason !== undefined && {
            reason: String(decision.reason),
          }),
        },
      ],
    };
    await this.save(next, [], {}, head.calls);
    return this.drive(
      compiled,
      next,
      new CallLog(this.store, this.ring, runId, next.segment, next.incarnation),
      { book, seen: calls.length, recovered: false },
    );
  }

  /**
   * Whether the resume policy lets `requester` (not the run's identity) resume the run: asked
   * only for a paused run, and only `true` allows.
   */
  private async mayResume(
    cp: Checkpoint,
    requester: RunIdentity,
    decision: ResumeDecision,
  ): Promise<boolean> {
    if (!this.canResume || cp.status !== 'paused' || !cp.pending) return false;
    const allowed = await this.canResume({
      runId: cp.runId,
      flow: cp.flow,
      run: { ...cp.identity },
      requester: { ...requester },
      pending: { ...cp.pending },
      decision: { ...decision },
    });
    return allowed === true;
  }

  /**
   * The run's head and latest checkpoint, checked: flow, identity (or, for a ctx that is not the
   * run's, `allow`), not ended, same graph.
   */
  private async readLatest<S>(
    compiled: CompiledFlow<S>,
    runId: string,
    ctx: RunIdentity | undefined,
    allow?: (cp: Checkpoint, requester: RunIdentity) => Promise<boolean>,
  ) {
    // The head first: its call count is what a claim will insist on (see RunHead.calls).
    const head = await this.store.head(runId);
    const record = await this.store.latest(runId);
    if (!head || !record) throw new CheckpointNotFound(runId);
    if (record.step !== head.step) {
      throw new CheckpointConflict(
        Messages.conflictStep(runId, head.step + 1, record.step),
        runId,
      );
    }
    const cp = openCheckpoint(this.ring, record);
    assertHeadSegment(head, record);
    // Identity before anything else: a stranger learns nothing of the run, not even its flow.
    let identity: RunIdentity;
    try {
      identity = checkAccess(cp, ctx);
    } catch (error) {
      // Someone else's ctx: allowed only by the policy; the run keeps its own identity.
      if (!(error instanceof RunAccessDenied) || !ctx || !allow) throw error;
      if (!(await allow(cp, identityOf(ctx)))) throw error;
      identity = cp.identity;
    }
    if (cp.flow !== compiled.name) {
      throw new CheckpointConflict(
        Messages.otherFlow(runId, cp.flow, compiled.name),
        runId,
      );
    }
    if (cp.status === 'done' || cp.status === 'failed') {
      throw new CheckpointConflict(Messages.ended(runId, cp.status), runId);
    }
    // A fork has run nothing yet: its first claim adopts the flow's current graph.
    if (cp.digest !== compiled.digest && cp.reason !== 'fork')
      throw new FlowError(Messages.graphChanged(runId, compiled.name), runId);
    return { head, cp, identity };
  }

  /**
   * The call log of the superstep the checkpoint opened, checked before anything is written:
   * signatures, numbering, the head's count, and calls in doubt.
   */
  private async readCutSuperstep(
    cp: Checkpoint,
    head: RunHead,
    rerunInDoubt = false,
  ) {
    const { runId } = cp;
    // The run's idempotency keys need the key they were derived with, from the first call on.
    if (!this.ring.has(cp.idemKid))
      throw new CheckpointKeyError(Messages.unknownKeyId(cp.idemKid));
    const calls = await this.store.calls(runId, cp.superstep);
    assertNoGaps(runId, calls);
    const book = new ReplayBook(
      calls.map((c) => openCall(this.ring, c, cp.incarnation)),
    );
    // The head counts every call record; all but this superstep's are counted in the checkpoint.
    // A record lost from the end of the log (eviction, a partial restore) shows up here.
    await assertLogCount(this.store, head, cp.logBefore + calls.length);
    const undecided = book
      .inDoubt()
      .filter((p) => !this.executor.registry.get(p.call.tool)?.idempotent)
      .map((p) => [p.call.tool, p.why] as const);
    if (undecided.length && !rerunInDoubt)
      throw new RecoveryNeedsDecision(runId, undecided);
    return { calls, book };
  }

  /**
   * Recovers every unfinished run of the flow (for a worker on startup): run id → result or error.
   * A run whose owner's lease is still live is not taken (that worker may be healthy): it maps to
   * `RunLeaseHeld`, which says until when; call again after that. Runs this worker id owns but is
   * not driving are taken at once (this process restarted under a stable `workerId`).
   *
   * The map holds every run's outcome: for a sweep over many runs, `recoverEach` gives the same
   * outcomes one at a time, in memory that does not grow with the number of runs.
   */
  async recoverAll<S extends object>(
    flow: Flow<S>,
    options: RecoverAllOptions = {},
  ): Promise<Map<string, RunResult<S> | Error>> {
    const out = new Map<string, RunResult<S> | Error>();
    for await (const [runId, outcome] of this.recoverEach(flow, options))
      out.set(runId, outcome);
    return out;
  }

  /**
   * `recoverAll` as a stream: recovers every unfinished run of the flow and yields each run's
   * outcome (`[runId, result | error]`) as it settles, so a sweep over any number of runs holds at
   * most one page of listed runs (100) and `concurrency` recoveries (running, or settled and not
   * yet taken) at a time.
   *
   * ```ts
   * for await (const [runId, outcome] of runner.recoverEach(flow, { concurrency: 8 })) {
   *   if (outcome instanceof RecoveryNeedsDecision) alert(runId, outcome.calls);
   * }
   * ```
   *
   * Runs are listed by run id, a page at a time, only when a recovery slot is free and the last
   * page is used up; runs that finish meanwhile leave the unfinished set behind the cursor, so no
   * run is skipped or taken twice. Recovery goes on only while the loop pulls outcomes: a slow
   * consumer slows the sweep rather than piling up results. Leaving the loop early (`break`,
   * `throw`) stops listing and starting runs; the recoveries already started finish before the
   * loop exits. Leases, `force`, `rerunInDoubt` and `ctxFor` work as in `recoverAll` (a run's lease
   * is judged against the time its page was listed). A store that cannot list its runs makes the
   * iteration throw, after the outcomes of the recoveries already started.
   */
  recoverEach<S extends object>(
    flow: Flow<S>,
    options: RecoverAllOptions = {},
  ): AsyncGenerator<RecoveryOutcome<RunResult<S>>, void, undefined> {
    const concurrency = options.concurrency ?? 4;
    // Checked here, not on the first pull: a TypeError for a concurrency that is not 1 or more.
    const limit = pLimit(concurrency);
    return this.sweepRuns(flow, options, concurrency, limit);
  }

  private async *sweepRuns<S extends object>(
    flow: Flow<S>,
    options: RecoverAllOptions,
    concurrency: number,
    limit: ReturnType<typeof pLimit>,
  ): AsyncGenerator<RecoveryOutcome<RunResult<S>>, void, undefined> {
    let page: RunHead[] = [];
    let next = 0;
    let listedAt = 0;
    let after: string | undefined;
    let lastPage = false;
    // Settled outcomes not yet yielded: at most `concurrency` recoveries plus one lease-held run.
    const settled: Array<RecoveryOutcome<RunResult<S>>> = [];
    const running = new Set<Promise<void>>();
    let wake: (() => void) | undefined;
    try {
      for (;;) {
        // The consumer first: nothing more starts until what settled has been taken.
        while (settled.length) yield settled.shift()!;
        const more =
          !options.signal?.aborted && (next < page.length || !lastPage);
        if (more && running.size < concurrency) {
          if (next === page.length) {
            try {
              page = await this.store.listUnfinished(flow.name, {
                limit: RECOVER_PAGE_SIZE,
                ...(after !== undefined && { after }),
              });
            } catch (error) {
              // The runs recovered so far are still reported, then the listing's error.
              await Promise.all(running);
              while (settled.length) yield settled.shift()!;
              throw error;
            }
            listedAt = Date.now();
            next = 0;
            lastPage = page.length < RECOVER_PAGE_SIZE;
            after = page[page.length - 1]?.runId ?? after;
            continue;
          }
          const head = page[next++]!;
          const held = !options.force && this.leaseHeld(head, listedAt);
          if (held) {
            settled.push([head.runId, held]);
            continue;
          }
          const task: Promise<void> = limit(() =>
            this.recoverListed(flow, head.runId, options),
          ).then((outcome) => {
            running.delete(task);
            settled.push(outcome);
            wake?.();
          });
          running.add(task);
          continue;
        }
        if (!running.size) return; // nothing left to list, start or wait for
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    } finally {
      // Abandoned, or a listing failed: what was started finishes before the iteration ends.
      await Promise.all(running);
    }
  }

  /** One listed run's recovery, as an outcome (never rejects). */
  private async recoverListed<S extends object>(
    flow: Flow<S>,
    runId: string,
    options: RecoverAllOptions,
  ): Promise<RecoveryOutcome<RunResult<S>>> {
    try {
      const ctx = options.ctxFor?.(runId);
      // The lease is judged again on the head read just before the claim: a worker that took the
      // run since it was listed (another worker's sweep, an operator's recover) is not fenced.
      const result = await this.recoverRun(
        flow,
        runId,
        {
          ...(ctx && { ctx }),
          ...(options.rerunInDoubt && { rerunInDoubt: true }),
        },
        !options.force,
      );
      return [runId, result];
    } catch (error) {
      return [runId, error instanceof Error ? error : new Error(String(error))];
    }
  }

  /**
   * `RunLeaseHeld` when the run's owner may be alive at `now` (its lease has not expired); runs
   * this worker id owns but is not driving are free (this process restarted under a stable id).
   */
  private leaseHeld(head: RunHead, now: number): RunLeaseHeld | undefined {
    const { runId, status, owner, leaseExpiresAt } = head;
    if (status !== 'running' || leaseExpiresAt === undefined) return undefined;
    if (leaseExpiresAt < now) return undefined;
    if (owner === this.workerId && !this.driving.has(runId)) return undefined;
    return new RunLeaseHeld(runId, owner ?? '?', leaseExpiresAt);
  }

  /** The run's latest state as a result, without running anything. */
  async get<S extends object>(
    flow: Flow<S>,
    runId: string,
    options: { ctx?: RunIdentity } = {},
  ): Promise<RunResult<S>> {
    checkRunId(runId);
    const record = await this.store.latest(runId);
    if (!record) throw new CheckpointNotFound(runId);
    const cp = openCheckpoint(this.ring, record);
    checkAccess(cp, options.ctx); // first: a stranger learns nothing of the run, not its flow
    if (cp.flow !== flow.name)
      throw new CheckpointConflict(
        Messages.otherFlow(runId, cp.flow, flow.name),
        runId,
      );
    return this.result(flow.compile(), cp);
  }

  /**
   * Stops renewing leases (for shutdown): runs still in flight here become recoverable by other
   * workers once their leases expire. The store is not closed.
   */
  close(): void {
    this.closed = true;
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
  }

  /** One segment of a run (a start, a recovery or a resume), in its own span when traced. */
  private drive<S extends object>(
    flow: CompiledFlow<S>,
    start: Checkpoint,
    log: CallLog,
    taken?: { book: ReplayBook; seen: number; recovered: boolean },
  ): Promise<RunResult<S>> {
    return traced(
      'agent-adapter.run',
      {
        'agent_adapter.run_id': start.runId,
        'agent_adapter.flow': start.flow,
        'agent_adapter.segment': start.segment,
        'agent_adapter.step': start.step,
        'agent_adapter.reason': start.reason ?? '',
        'agent_adapter.worker': this.workerId,
      },
      async (span) => {
        const result = await this.driveSegment(flow, start, log, taken);
        span?.setAttribute('agent_adapter.status', result.status);
        span?.setAttribute('agent_adapter.final_step', result.step);
        return result;
      },
    );
  }

  private async driveSegment<S extends object>(
    flow: CompiledFlow<S>,
    start: Checkpoint,
    log: CallLog,
    taken?: { book: ReplayBook; seen: number; recovered: boolean },
  ): Promise<RunResult<S>> {
    this.hold(start.runId, true);
    try {
      let cp = start;
      let book = taken?.book;
      // Records of the current superstep that other segments wrote before this one took over.
      let seen = taken?.seen ?? 0;
      while (cp.status === 'running') {
        const scope: SuperstepScope = {
          runId: cp.runId,
          flow: cp.flow,
          superstep: cp.superstep,
          identity: cp.identity,
          log,
          ring: this.ring,
          idemKid: cp.idemKid,
          incarnation: cp.incarnation,
          inflight: new Set(),
          closed: false,
          ...(cp.decisions && { decisions: cp.decisions }),
          ...(this.approvals && { approvals: this.approvals }),
          ...(book && { replay: book }),
          replayed: [],
          rerun: [],
          unreplayed: [],
        };
        const outcome = await traced(
          'agent-adapter.superstep',
          {
            'agent_adapter.run_id': cp.runId,
            'agent_adapter.step': cp.step,
            'agent_adapter.superstep': cp.superstep,
            'agent_adapter.frontier': cp.frontier.join(','),
          },
          async (span) => {
            const out = await this.superstep(flow, cp, scope);
            span?.setAttribute('agent_adapter.replayed', scope.replayed.length);
            span?.setAttribute('agent_adapter.rerun', scope.rerun.length);
            return out;
          },
        );
        const calls = await log.drain(); // rethrows a refused or lost call write: this worker stops
        // A pause keeps the superstep open (it reruns on resume, replaying what finished) with
        // its decisions so far; any other outcome closes it and drops the spent decisions.
        const next: Checkpoint =
          'pause' in outcome
            ? {
                ...cp,
                step: cp.step + 1,
                status: 'paused',
                reason: 'pause',
                pending: outcome.pause,
              }
            : {
                ...cp,
                step: cp.step + 1,
                superstep: cp.superstep + 1,
                logBefore: cp.logBefore + seen + log.count(cp.superstep),
                reason: 'superstep',
                decisions: undefined,
                recoveries: undefined,
                ...('error' in outcome
                  ? { status: 'failed', error: outcome.error }
                  : {
                      status: outcome.frontier.length ? 'running' : 'done',
                      state: outcome.state,
                      frontier: outcome.frontier,
                      visits: outcome.visits,
                    }),
              };
        const extra = {
          ...(scope.unreplayed.length && { unreplayed: scope.unreplayed }),
          stage: cp.frontier.join('+'),
        };
        const recovered = book !== undefined && taken?.recovered === true;
        if (
          next.status === 'running' &&
          !recovered &&
          next.frontier.every((n) => flow.nodes.get(n)?.callsFirst)
        ) {
          // The next nodes only compute until their first call: the checkpoint goes out with that
          // call's `started` record (one round trip for both), or alone once the microtask queue
          // is empty. No tool runs before both are stored; a refused write fails its calls.
          const write = this.checkpointWrite(next, [], extra);
          log.saveWith(write.record, calls, write.options, write.saved);
        } else {
          await this.save(next, calls, extra);
        }
        if (recovered) {
          this.events.emit('run.recovered', {
            kind: cp.kind,
            runId: cp.runId,
            flow: cp.flow,
            step: next.step,
            replayed: scope.replayed,
            rerun: scope.rerun,
          });
        }
        book = undefined;
        if (next.reason !== 'pause') seen = 0;
        cp = next;
      }
      return this.result(flow, cp);
    } catch (error) {
      // A checkpoint handed to the log may still be in flight: the caller learns of the error
      // only once the store is quiet, so what it reads next is what this worker left.
      await log.settled();
      throw error;
    } finally {
      this.hold(start.runId, false);
    }
  }

  /** Runs the frontier's nodes concurrently on one snapshot; returns the merged outcome. */
  private async superstep<S extends object>(
    flow: CompiledFlow<S>,
    cp: Checkpoint,
    scope: SuperstepScope,
  ): Promise<
    | {
        state: CanonicalText;
        frontier: string[];
        visits: Record<string, number>;
      }
    | { error: SealedError }
    | { pause: PendingApproval }
  > {
    const visits = { ...cp.visits };
    for (const name of cp.frontier) {
      const node = flow.nodes.get(name);
      if (!node)
        return {
          error: {
            name: 'FlowError',
            message: `node "${name}" is not in the flow`,
            node: name,
          },
        };
      visits[name] = (visits[name] ?? 0) + 1;
      if ((visits[name] ?? 0) > node.maxVisits) {
        return {
          error: {
            name: 'FlowError',
            message: `node "${name}" would run more than ${node.maxVisits} times (maxVisits); the flow loops without end`,
            node: name,
          },
        };
      }
    }
    const state = flow.state.encode(cp.state);
    const settled = await Promise.allSettled(
      cp.frontier.map((name) => {
        const node = flow.nodes.get(name)!;
        const nodeScope: NodeScope = { step: scope, node: name, nextIndex: 0 };
        const ctx: NodeContext = {
          runId: cp.runId,
          flow: cp.flow,
          node: name,
          superstep: cp.superstep,
          identity: cp.identity,
          call: <R>(tool: string, args?: unknown) =>
            this.executor.call(nodeScope, tool, args) as Promise<R>,
          skipCall: () => {
            nodeScope.nextIndex++;
          },
        };
        return nodeStorage.run(nodeScope, async () =>
          node.run(flow.state.view(state), ctx),
        );
      }),
    );
    // Calls a node left running (not awaited) finish before the checkpoint; later ones are refused.
    while (scope.inflight.size) await Promise.allSettled([...scope.inflight]);
    scope.closed = true;
    // A refused or lost call write means this worker lost the run, whatever a node made of it.
    if (scope.log.failure !== undefined) throw scope.log.failure;
    // A call waits for an approval: the run pauses, whatever the nodes made of it.
    if (scope.paused) return { pause: scope.paused };
    const updates: Array<readonly [string, unknown]> = [];
    for (const [i, result] of settled.entries()) {
      const node = cp.frontier[i] as string;
      if (result.status === 'rejected')
        return { error: sealError(result.reason, node) };
      updates.push([node, result.value]);
    }
    try {
      const merged = mergeEncoded(flow, state, updates);
      return {
        state: merged,
        frontier: nextFrontier(flow, cp.frontier, merged),
        visits,
      };
    } catch (error) {
      return { error: sealError(error) };
    }
  }

  private async save(
    cp: Checkpoint,
    calls: SaveOptions['calls'] = [],
    extra: SavedExtra = {},
    expectCalls?: number,
  ) {
    const write = this.checkpointWrite(cp, calls, extra, expectCalls);
    await this.store.save(write.record, write.options());
    write.saved();
  }

  /** A checkpoint's sealed record, its save options (read when written) and its event. */
  private checkpointWrite(
    cp: Checkpoint,
    calls: SaveOptions['calls'] = [],
    extra: SavedExtra = {},
    expectCalls?: number,
  ) {
    const { stage, ...rest } = extra;
    return {
      record: sealCheckpoint(this.ring, cp),
      options: (): SaveOptions => ({
        ...(calls.length && { calls }),
        ...(expectCalls !== undefined && { expectCalls }),
        owner: this.workerId,
        leaseExpiresAt: Date.now() + this.leaseMs,
      }),
      saved: () =>
        this.events.emit('checkpoint.saved', {
          kind: cp.kind,
          runId: cp.runId,
          flow: cp.flow,
          step: cp.step,
          status: cp.status,
          // A loop's stage: the node that just ran ('model' | 'tools'), else why it was saved.
          ...(cp.kind === 'loop' && { stage: stage ?? cp.reason }),
          ...rest,
        }),
    };
  }

  private result<S extends object>(
    flow: CompiledFlow<S>,
    cp: Checkpoint,
  ): RunResult<S> {
    return {
      runId: cp.runId,
      status: cp.status,
      step: cp.step,
      state: flow.state.view(cp.state),
      ...(cp.error && { error: cp.error }),
      ...(cp.pending && { pending: cp.pending }),
    };
  }

  /**
   * Keeps the leases of the runs this worker is driving alive: one store write per interval for
   * all of them. A run it stops driving (ended, paused, or lost to an error) is no longer renewed,
   * so its lease runs out and another worker may take it.
   */
  private hold(runId: string, driving: boolean): void {
    // Counted: a run recovered here while an older drive of it is still unwinding stays renewed.
    const drives = (this.driving.get(runId) ?? 0) + (driving ? 1 : -1);
    if (drives > 0) this.driving.set(runId, drives);
    else this.driving.delete(runId);
    if (this.driving.size > 0 && !this.renewTimer && !this.closed) {
      this.renewTimer = setInterval(
        () => void this.renew(),
        Math.max(100, Math.floor(this.leaseMs / 3)),
      );
      this.renewTimer.unref();
    } else if (this.driving.size === 0 && this.renewTimer) {
      clearInterval(this.renewTimer);
      this.renewTimer = undefined;
    }
  }

  private async renew(): Promise<void> {
    if (this.renewing || this.driving.size === 0) return; // a slow store: skip, never pile up
    this.renewing = true;
    try {
      await this.store.renewLeases(this.workerId, Date.now() + this.leaseMs, [
        ...this.driving.keys(),
      ]);
    } catch (error) {
      console.warn(
        `agent-adapter: lease renewal failed for worker ${this.workerId}`,
        error,
      );
    } finally {
      this.renewing = false;
    }
  }
}

/** What a saved checkpoint's event says besides the checkpoint itself. */
interface SavedExtra {
  unreplayed?: SuperstepScope['unreplayed'];
  /** The node(s) whose superstep this checkpoint closes (or pauses). */
  stage?: string;
}

function sealError(error: unknown, node?: string): SealedError {
  const e = error instanceof Error ? error : new Error(String(error));
  return {
    name: e.name,
    message: e.message,
    ...(node !== undefined && { node }),
  };
}

function identityOf(ctx: RunIdentity | undefined): RunIdentity {
  const out: RunIdentity = {};
  for (const key of ['user', 'thread', 'principal'] as const) {
    const value = ctx?.[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string')
      throw new TypeError(`ctx.${key} must be a string.`);
    out[key] = value;
  }
  return out;
}

/**
 * Without a ctx the run's user and thread are restored, unless it acts with a principal (which the
 * caller must show). With a ctx, it must be the run's own identity.
 */
function checkAccess(
  cp: Checkpoint,
  ctx: RunIdentity | undefined,
): RunIdentity {
  const stored = cp.identity;
  if (!ctx) {
    if (stored.principal !== undefined) {
      throw new RunAccessDenied(
        cp.runId,
        'the run acts with a principal, so recovering it needs its ctx',
      );
    }
    return stored;
  }
  const given = identityOf(ctx);
  for (const key of ['user', 'thread', 'principal'] as const) {
    if (given[key] !== stored[key]) {
      throw new RunAccessDenied(cp.runId, `the ctx's ${key} is not the run's`);
    }
  }
  return stored;
}
