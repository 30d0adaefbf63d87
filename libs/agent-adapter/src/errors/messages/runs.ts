/** Runs and their checkpoints: conflicts, fencing, recovery, corruption, access (the core's run errors). */
export const RunMessages = {
  notFound: (runId: string) =>
    `No checkpoint is stored for run "${runId}". Check the run id and that this worker uses the same store (and tenant prefix/schema) as the one that started it.`,
  conflictStep: (runId: string, step: number, stored: number | undefined) =>
    stored === undefined
      ? `Run "${runId}": cannot save step ${step}, the run does not exist (it was deleted or expired, or never started). This worker must stop working on it.`
      : step === 0
        ? `Run "${runId}" already exists (stored step ${stored}). Use another run id, or recover the existing run.`
        : `Run "${runId}": another worker saved step ${stored} first, so step ${step} was refused. This worker lost the run and ran nothing further; leave it to the winner.`,
  startedWithOtherInput: (runId: string) =>
    `Run "${runId}" already exists and started from another input: a run id names one run. Use another run id for this input, or get the existing run.`,
  backgroundRunStopped: (runId: string) =>
    `agent-adapter: run "${runId}", started with { wait: false }, stopped on this worker with an error; recovery takes it from its last checkpoint (runs inspect ${runId})`,
  fenced: (runId: string, segment: number, current: number | undefined) =>
    current === undefined
      ? `Run "${runId}" no longer exists (it was deleted or expired): this worker must stop; the call was not started.`
      : `Run "${runId}": segment ${segment} was cut off (the run's current segment is ${current}): another worker recovered it, or the run ended or paused. This worker must stop; the call was not started.`,
  callOutOfOrder: (
    runId: string,
    record: { segment: number; superstep: number; seq: number },
    last: { segment: number; superstep: number; seq: number },
  ) =>
    `Run "${runId}": call record ${record.seq} of segment ${record.segment}, superstep ${record.superstep} does not come after record ${last.seq} of segment ${last.segment}, superstep ${last.superstep}, the last one stored or before it in the batch: a segment's records are appended once each, in order. Another writer uses this segment; stop this worker.`,
  duplicateRow: (runId: string) =>
    `Run "${runId}": a row with a key this write gives (a checkpoint's step or a call record's) is already stored, though the run's head does not count it: another writer wrote it, or it was put there below the store. Nothing was written; stop this worker and inspect the run (npx agent-adapter runs verify).`,
  logMoved: (runId: string) =>
    `Run "${runId}": its call log grew after this worker read it, so the worker that logged the call is alive; the claim was refused and nothing ran. Leave the run to that worker.`,
  notPaused: (runId: string, status: string) =>
    `Run "${runId}" is ${status}, not paused: there is no approval to decide (another resume may have won). Read the run's state before deciding again.`,
  ended: (runId: string, status: string) =>
    `Run "${runId}" has ended (${status}); there is nothing to recover. Start a new run, or fork this one from an earlier checkpoint.`,
  otherFlow: (runId: string, stored: string, given: string) =>
    `Run "${runId}" belongs to flow "${stored}", not "${given}". Recover it with its own flow.`,
  admissionFailed: (queue: string, why: string) =>
    `agent-adapter: admission from queue "${queue}" failed (${why}); its runs wait, and the next look asks again.`,
  runQueued: (runId: string, queue: string) =>
    `Run "${runId}" waits on queue "${queue}": it starts only when a worker admits it there, under the queue's limits. Cancel it, or leave it to the queue.`,
  leaseHeld: (runId: string, owner: string, until: number) =>
    `Run "${runId}" is held by worker "${owner}" until ${new Date(until).toISOString()}: that worker may be alive, so it was not taken. Call recoverAll again after that time, or recover it now (recover(flow, runId), or recoverAll with { force: true }) only if you know that worker is gone.`,
  corruptSignature: (runId: string, what: string) =>
    `Run "${runId}": ${what} does not match its signature (changed, forged, copied from another run or position, or signed with a key this worker does not have). Nothing was run from it. Check that every worker uses the same checkpoint key ring; inspect the run (npx agent-adapter runs verify), or restore the store from a backup (then mark its runs: npx agent-adapter runs restored, docs/operations.md#restoring-a-backup).`,
  corruptUnknownKey: (runId: string, what: string, kid: string) =>
    `Run "${runId}": ${what} is signed with an unknown key id "${kid}", a key this worker's key ring does not hold. Nothing was run from it. Give this worker the key ring the other workers use (during a rotation, keep the old key in "previous"); if no worker ever had that key, the row was forged.`,
  corruptUnreadable: (runId: string, what: string, why: string) =>
    `Run "${runId}": ${what} is unreadable (${why}). Nothing was run from it. Inspect the run (npx agent-adapter runs verify), or restore the store from a backup (then mark its runs: npx agent-adapter runs restored, docs/operations.md#restoring-a-backup).`,
  corruptIncarnation: (
    runId: string,
    what: string,
    found: number,
    expected: number,
  ) =>
    `Run "${runId}": ${what} belongs to incarnation ${found} of this run id, the run is incarnation ${expected}: it was copied from an earlier run with the same id. Nothing was run from it. Inspect the run (npx agent-adapter runs verify), or restore the store from a backup (then mark its runs: npx agent-adapter runs restored, docs/operations.md#restoring-a-backup).`,
  corruptHeadSegment: (
    runId: string,
    step: number,
    found: number,
    head: number,
  ) =>
    `Run "${runId}": checkpoint step ${step} is of segment ${found}, the run's head says segment ${head}: the checkpoint was copied in (from an earlier run with the same id?) or the head was changed. Nothing was run. Inspect the run (npx agent-adapter runs verify), or restore the store from a backup (then mark its runs: npx agent-adapter runs restored, docs/operations.md#restoring-a-backup).`,
  segmentWithoutCount: (runId: string, segment: number) =>
    `Run "${runId}": segment ${segment}'s first write is not a checkpoint that knows the run's call count (a new run's, or a claim with expectCalls). This is a bug in agent-adapter; nothing was written.`,
  corruptHeadMissing: (runId: string, step: number) =>
    `Run "${runId}": checkpoint step ${step} is stored but the run has no head: the head row was deleted. Nothing was run. Inspect the run (agent-adapter runs verify) and restore the store from a backup (then mark its runs: npx agent-adapter runs restored, docs/operations.md#restoring-a-backup).`,
  corruptLatestMissing: (
    runId: string,
    head: number,
    latest: number | undefined,
  ) =>
    `Run "${runId}": the run's (sealed) head is at step ${head}, but the newest stored checkpoint is ${latest === undefined ? 'missing' : `step ${latest}`}: checkpoint rows were deleted, or this worker reads the store through a replica that lags behind (read it from the primary). Nothing was run. Inspect the run (agent-adapter runs verify).`,
  corruptHeadIncarnation: (runId: string, head: number, checkpoint: number) =>
    `Run "${runId}": the run's head is of incarnation ${head}, its latest checkpoint of incarnation ${checkpoint}: rows of an earlier run with this id were copied in. Nothing was run. Inspect the run (agent-adapter runs verify) and restore the store from a backup (then mark its runs: npx agent-adapter runs restored, docs/operations.md#restoring-a-backup).`,
  workerDraining: (runId: string, worker: string, step: number) =>
    `Run "${runId}": worker "${worker}" is shutting down, so it stopped the run after step ${step} (stored) and released it: another worker takes it over at once (its continuous takeover, or recover).`,
  drainTimedOut: (worker: string, runs: number, ms: number) =>
    `agent-adapter: worker "${worker}" still drives ${runs} run(s) after draining for ${ms} ms (a superstep still running); their leases are no longer renewed, so another worker takes them over once they expire.`,
  takeoverFailed: (why: string) =>
    `agent-adapter: a takeover of a due run failed unexpectedly (${why}); the run stays due and is looked at again.`,
  takeoverLookFailed: (why: string) =>
    `agent-adapter: looking for due runs failed (${why}); looking again at the next interval.`,
  releaseFailed: (runId: string, worker: string) =>
    `Worker "${worker}" could not release run "${runId}" after the store failed it; its lease runs out as usual, then another worker takes it.`,
  storeStayedUnavailable: (runId: string, attempts: number, why: string) =>
    `Run "${runId}": the store stayed unavailable through ${attempts} attempts to write (${why}). This worker stopped driving the run and released it; the write's outcome was read back where the store allowed, and another worker (or a later recoverAll) takes the run over from what is stored.`,
  corruptCount: (runId: string, counted: number, found: number) =>
    `Run "${runId}": the run's head counts ${counted} call records, but its checkpoint and call log account for ${found}: records are missing (evicted, deleted or restored from an older backup) or the head was changed. Nothing was run. Inspect the run, or restore the store (then mark its runs: npx agent-adapter runs restored, docs/operations.md#restoring-a-backup); with Redis, use maxmemory-policy noeviction.`,
  /** `runs verify`: the head's unsealed last key (call-order.ts) is not the log's last record. */
  corruptLastCall: (
    kept: { segment: number; superstep: number; seq: number } | undefined,
    found: { segment: number; superstep: number; seq: number } | undefined,
  ) => {
    const key = (k: typeof kept) =>
      k
        ? `record ${k.seq} of segment ${k.segment}, superstep ${k.superstep}`
        : 'none';
    return `its last call record is ${key(kept)}, the log's last is ${key(found)}: the head was changed below the store. Appends are checked against this key, so the run's appends would be refused, or a record written twice would not be. Inspect the run, or restore the store from a backup (docs/operations.md#restoring-a-backup).`;
  },
  corruptGap: (
    runId: string,
    segment: number,
    expected: number,
    found: number,
  ) =>
    `Run "${runId}": the call log of segment ${segment} has a gap (expected record ${expected}, found ${found}): a record is missing. Nothing was run. Inspect the run (npx agent-adapter runs verify), or restore the store from a backup (then mark its runs: npx agent-adapter runs restored, docs/operations.md#restoring-a-backup).`,
  needsDecision: (
    runId: string,
    calls: ReadonlyArray<readonly [string, string]>,
  ) =>
    `Run "${runId}" has ${calls.length} call(s) in doubt that may or may not have run: ${calls
      .map(([tool, why]) => `${tool} (${why})`)
      .join(
        ', ',
      )}. Check each at its system (was the mail sent? the card charged?), then say what it did with resolve(flow, runId, { calls: [{ call, ran: true, result } | { call, ran: false }] }) (or the viewer, or runs resolve), or rerun them all with recover(..., { rerunInDoubt: true }). Nothing was written.`,
  graphChanged: (runId: string, flow: string) =>
    `Run "${runId}": the graph of flow "${flow}" changed since its checkpoint was saved (digest mismatch). Deploy the old flow to finish the run, or fork it onto the new graph.`,
  strangerRerun: (runId: string) =>
    `rerunInDoubt is the run's own decision (or an operator's, through recover): a requester the resume policy lets decide the pending call of run "${runId}" may not rerun its calls in doubt`,
  principalNeedsCtx: () =>
    'the run acts with a principal, so recovering it needs its ctx',
  ctxFieldDiffers: (key: string) => `the ctx's ${key} is not the run's`,
  restartNeedsCtx: () =>
    'the run was started with a ctx: starting it again needs that ctx',
  restoredCall: () =>
    'not run here: the store was restored from a backup, and it may have run after the backup was taken',
  notInDoubt: (runId: string, call: string, inDoubt: readonly string[]) =>
    `Run "${runId}": call ${call} is not in doubt, so there is nothing to resolve for it. ${inDoubt.length ? `The calls in doubt are: ${inDoubt.join(', ')}.` : 'No call of the run is in doubt now (another decision or a recovery may have settled it).'} Nothing was written.`,
  badResolution: (runId: string, why: string) =>
    `Resolving run "${runId}": ${why}. Nothing was written.`,
  accessDenied: (runId: string, why: string) =>
    `Run "${runId}": access denied, ${why}. Recover it with the run's own identity.`,
  notInRun: () =>
    `idempotencyKey() was called outside a durable run's tool call, so there is no key to give: it gives one only while a run executes a tool (a @Tool method called from a node, or a function registered on the ToolRegistry and called through ctx.call or Call()), never a made-up one. Code that may also run outside a run (a @Tool method called directly, a node's own code) should check inRun() and, outside a run, pass its caller's own key: inRun() ? idempotencyKey() : key.`,
  parked: (runId: string, recoveries: number, superstep: number) =>
    `Run "${runId}" was recovered ${recoveries} time(s) without completing superstep ${superstep} (maxRecoveryAttempts), so it was parked as failed instead of being recovered again. Find out why its workers stop there (npx agent-adapter runs inspect ${runId}), then fork it (runs fork ${runId} --from-step N) to run it again.`,
  paused: (runId: string, tool: string) =>
    `Run "${runId}" paused: "${tool}" waits for an approval. Resume it with resume(flow, runId, { approved }).`,
  sleeping: (runId: string, node: string, wakeAt: number) =>
    `Run "${runId}" sleeps until ${new Date(wakeAt).toISOString()} (node "${node}"): a worker with a takeover wakes it then.`,
  approvalTimedOut: (tool: string, deadline: number) =>
    `No decision on "${tool}" by its approval deadline (${new Date(deadline).toISOString()}); the tool says onTimeout: 'fail'.`,
  approvalDeadlinePassed: (deadline: number) =>
    `no decision by the approval deadline (${new Date(deadline).toISOString()})`,
  scheduleIdTaken: (name: string, flow: string) =>
    `The record id of schedule "${name}" (schedule:${name}) is taken by a run of flow "${flow}": rename the schedule, or delete that run.`,
  scheduleNotHere: (name: string) =>
    `Schedule "${name}" is not declared in this process: a worker that declares it fires its ticks.`,
  scheduleFlowMoved: (name: string, stored: string, here: string) =>
    `Schedule "${name}" is stored for flow "${stored}" but declared here for flow "${here}": declare it for one flow, or give it another name.`,
  noSchedule: (name: string) =>
    `No schedule "${name}" is stored. Declare it first (runner.schedule or @DurableCron).`,
  cancelled: (by: string, reason?: string) =>
    `cancelled by operator (${by})${reason ? `: ${reason}` : ''}`,
} as const;
