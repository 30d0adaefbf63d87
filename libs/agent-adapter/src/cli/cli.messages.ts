/** What the clock does at an approval deadline, by the tool's `onTimeout`. */
const CLOCK_DOES = {
  deny: 'the clock denies the call',
  approve: 'the clock approves the call',
  fail: 'the clock fails the run',
} as const;

/** Message factories of the CLI: every `CliError` says what is wrong and what to do. @internal */
export const CliMessages = {
  restoredRuns: (
    r: {
      marked: readonly string[];
      skipped: ReadonlyArray<{ runId: string; why: string }>;
    },
    planned = false,
  ) =>
    (planned
      ? `Accepted a planned failover for ${r.marked.length} unfinished run(s): they go on as they are, no call held back.\n`
      : `Marked ${r.marked.length} unfinished run(s) restored: recovery runs no call of a tool that is not idempotent that the restored rows do not record done without a decision (resolve it, or rerun). Recover them as usual; each such call stops recovery once, named.\n`) +
    r.skipped.map((s) => `Not marked: ${s.runId}: ${s.why}\n`).join(''),
  resolved: (runId: string, call: string, ran: boolean, step: number) =>
    `Resolved call ${call} of run ${runId}: ${ran ? 'it ran; recovery replays its outcome and never runs it' : 'it did not run; recovery runs it once'} (checkpoint step ${step}). Recover the run to go on (the viewer, your app's recover, or a worker's boot sweep).\n`,
  plannedWithoutFailover: () =>
    'runs restored: --planned is for a failover: give --failover with it.',
  resolveRanOrNot: () =>
    'runs resolve: give exactly one of --ran (the call happened) or --not-run (it did not).',
  resolveNotRunWithOutcome: () =>
    'runs resolve: --not-run takes no --result or --error (a call that did not run has none).',
  resolveResultOrError: () =>
    'runs resolve: give --result or --error, not both.',
  resolveResultNotJson: (why: string) =>
    `runs resolve: --result is not JSON (${why}). Quote it for the shell, e.g. --result '{"charge":"ch_123"}'.`,
  pruneKeptCorrupt: (runId: string, detail: string) =>
    `Kept run ${runId}: it is listed as finished but does not verify, so it was not deleted (${detail}). Check it with: agent-adapter runs verify ${runId}\n`,
  sqlitePathMissing: (url: string) =>
    `Store URL "${url}": give the SQLite file, e.g. sqlite:data/runs.db.`,
  noSuchFile: (url: string, path: string) =>
    `Store URL "${url}": no such file "${path}".`,
  ttlSeconds: (url: string) =>
    `Store URL "${url}": ttlSeconds must be a positive integer.`,
  unknownScheme: (url: string, scheme: string | undefined, help: string) =>
    `Unknown store URL ${scheme === undefined ? `"${url}"` : `scheme "${scheme}:"`}. Use one of:\n${help}`,
  invalidUrl: (url: string) => `Store URL "${url}" is not a valid URL.`,
  unknownParameter: (url: string, name: string, known: readonly string[]) =>
    `Store URL "${url}": unknown parameter "${name}" (known: ${known.join(', ')}).`,
  keyNotSet: (env: string) =>
    `${env} is not set: give the checkpoint key the workers use (the secret, or a JSON key ring {"current": ..., "previous": [...]}). It is needed to verify and to sign rows.`,
  keyOf: (env: string, message: string) => `${env}: ${message}`,
  keyRingJson: (env: string, why: string) =>
    `${env} looks like a JSON key ring but is not valid JSON (${why}).`,
  noCheckpointAt: (runId: string, step: number, steps: readonly number[]) =>
    `Run "${runId}" has no checkpoint at step ${step} (it has steps ${Math.min(...steps)} to ${Math.max(...steps)}).`,
  nothingToFork: (runId: string, step: number) =>
    `Checkpoint ${step} of run "${runId}" has no node left to run (the run was done there); fork an earlier step.`,
  forkUnfinished: (runId: string, status: string) =>
    `Run "${runId}" has not finished (${status}): its workers could still drive it, and a fork is a second run with new idempotency keys, so every side effect both runs make would happen twice (no provider can deduplicate them). Nothing was written. Fork with --cancel-source to cancel the source first (as runs cancel does), or cancel it yourself, then fork.`,
  forkAfterCancel: (runId: string, step: number, why: string) =>
    `Run "${runId}" was cancelled (failed checkpoint at step ${step}), but the fork was not written: ${why} Run fork again (the source has ended, so --cancel-source is no longer needed).`,
  forkExists: (runId: string) =>
    `Run "${runId}" already exists; choose another id for the fork (--run-id).`,
  movedWhileCancelling: (
    runId: string,
    expected: number,
    step: number,
    status: string,
  ) =>
    `Run "${runId}" moved while it was being cancelled (read at step ${expected}, now at step ${step}, ${status}): nothing was written. Look at it again (runs show) before deciding.`,
  // Runs that wait for a time (cli/due-time.ts, inspect.ts).
  onTimeout: (action: 'deny' | 'approve' | 'fail') =>
    `then ${CLOCK_DOES[action]}`,
  inspectSleeping: (runId: string, wakeAt: number, now: number) =>
    wakeAt > now
      ? `The run sleeps until ${new Date(wakeAt).toISOString()}: recover returns it as it is until then, and a worker with a takeover wakes it then (its node runs again, its finished calls and its sleep replay). runs cancel ${runId} ends it instead. Nothing was written.`
      : `The run's wake time (${new Date(wakeAt).toISOString()}) has passed: a worker's takeover wakes it at its next look, or recover(flow, runId) now (no recovery is counted). Nothing was written.`,
  inspectPaused: (tool: string, node: string) =>
    `The run is paused: "${tool}" (node ${node}) waits for an approval. recover returns it as it is; resume(flow, runId, { approved }) decides it.`,
  inspectDeadline: (
    deadline: number,
    action: 'deny' | 'approve' | 'fail',
    now: number,
  ) =>
    deadline > now
      ? ` Its approval deadline is ${new Date(deadline).toISOString()}: then ${CLOCK_DOES[action]}, unless a person decides first (one decision wins).`
      : ` Its approval deadline (${new Date(deadline).toISOString()}) has passed: a worker's takeover (or recover) lets the clock decide: ${CLOCK_DOES[action]}.`,
  cancelEnded: (runId: string, status: string) =>
    `Run "${runId}" has already ended (${status}); there is nothing to cancel.`,
  // cli/program.ts uses these.
  noStore: (env: string, help: string) =>
    `No store: give --store <url> or set $${env}. Store URLs:\n${help}`,
  verifyOneOf: () =>
    'runs verify: give exactly one of <id>, --all or --bundle <file>.',
  cannotRead: (file: string, why: string) => `Cannot read ${file}: ${why}`,
  notJson: (file: string, why: string) =>
    `${file} is not JSON (${why}): not an audit bundle.`,
  redisUnreachable: (where: string, why: string) =>
    `cannot connect to Redis at ${where}: ${why}. Check the URL and that the server is up.`,
  redisEmpty: (prefix: string, where: string) =>
    `no agent-adapter data under prefix "${prefix}" on ${where}: check the prefix.`,
  // Option values (commander's InvalidArgumentError, which names the option and value before these).
  positiveInteger: () => 'must be a positive integer.',
  stepNumber: () => 'must be a step number (0, 1, 2...).',
  notADate: (value: string) =>
    `"${value}" is not a date: use ISO-8601 (2026-01-31, 2026-01-31T12:00:00Z) or an age (30d, 12h, 90m).`,
  // runs verify --bundle (cli/verify.ts, verify-commands.ts).
  notABundle: (format: string) =>
    `Not an agent-adapter audit bundle (expected "format": "${format}"; make one with: agent-adapter runs export <id>).`,
  retiredBundle: (format: string, why: string) =>
    `This audit bundle has format "${format}" (${why}), made by an earlier development build; export the run again with this version: agent-adapter runs export <id>.`,
  bundleInvalid: (file: string, message: string) => `${file}: ${message}`,
} as const;
