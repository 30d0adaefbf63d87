/** Message factories: one place for the wording of every error, each saying what to do next. */
export const Messages = {
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
  duplicateCall: (
    runId: string,
    segment: number,
    superstep: number,
    seq: number,
  ) =>
    `Run "${runId}": call record ${seq} of segment ${segment}, superstep ${superstep} already exists. Another writer uses this segment; stop this worker.`,
  logMoved: (runId: string) =>
    `Run "${runId}": its call log grew after this worker read it, so the worker that logged the call is alive; the claim was refused and nothing ran. Leave the run to that worker.`,
  notPaused: (runId: string, status: string) =>
    `Run "${runId}" is ${status}, not paused: there is no approval to decide (another resume may have won). Read the run's state before deciding again.`,
  ended: (runId: string, status: string) =>
    `Run "${runId}" has ended (${status}); there is nothing to recover. Start a new run, or fork this one from an earlier checkpoint.`,
  otherFlow: (runId: string, stored: string, given: string) =>
    `Run "${runId}" belongs to flow "${stored}", not "${given}". Recover it with its own flow.`,
  leaseHeld: (runId: string, owner: string, until: number) =>
    `Run "${runId}" is held by worker "${owner}" until ${new Date(until).toISOString()}: that worker may be alive, so it was not taken. Call recoverAll again after that time, or recover it now (recover(flow, runId), or recoverAll with { force: true }) only if you know that worker is gone.`,
  corruptSignature: (runId: string, what: string) =>
    `Run "${runId}": ${what} does not match its signature (changed, forged, copied from another run or position, or signed with a key this worker does not have). Nothing was run from it. Restore the store from a backup or inspect the run; check that every worker uses the same checkpoint key ring.`,
  corruptUnknownKey: (runId: string, what: string, kid: string) =>
    `Run "${runId}": ${what} is signed with an unknown key id "${kid}", a key this worker's key ring does not hold. Nothing was run from it. Give this worker the key ring the other workers use (during a rotation, keep the old key in "previous"); if no worker ever had that key, the row was forged.`,
  corruptUnreadable: (runId: string, what: string, why: string) =>
    `Run "${runId}": ${what} is unreadable (${why}). Nothing was run from it. Restore the store from a backup or inspect the run.`,
  corruptIncarnation: (
    runId: string,
    what: string,
    found: number,
    expected: number,
  ) =>
    `Run "${runId}": ${what} belongs to incarnation ${found} of this run id, the run is incarnation ${expected}: it was copied from an earlier run with the same id. Nothing was run from it. Restore the store from a backup or inspect the run.`,
  corruptHeadSegment: (
    runId: string,
    step: number,
    found: number,
    head: number,
  ) =>
    `Run "${runId}": checkpoint step ${step} is of segment ${found}, the run's head says segment ${head}: the checkpoint was copied in (from an earlier run with the same id?) or the head was changed. Nothing was run. Restore the store from a backup or inspect the run.`,
  segmentWithoutCount: (runId: string, segment: number) =>
    `Run "${runId}": segment ${segment}'s first write is not a checkpoint that knows the run's call count (a new run's, or a claim with expectCalls). This is a bug in agent-adapter; nothing was written.`,
  corruptHeadMissing: (runId: string, step: number) =>
    `Run "${runId}": checkpoint step ${step} is stored but the run has no head: the head row was deleted. Nothing was run. Inspect the run (agent-adapter runs verify) and restore the store from a backup.`,
  corruptLatestMissing: (
    runId: string,
    head: number,
    latest: number | undefined,
  ) =>
    `Run "${runId}": the run's (sealed) head is at step ${head}, but the newest stored checkpoint is ${latest === undefined ? 'missing' : `step ${latest}`}: checkpoint rows were deleted, or this worker reads the store through a replica that lags behind (read it from the primary). Nothing was run. Inspect the run (agent-adapter runs verify).`,
  corruptHeadIncarnation: (runId: string, head: number, checkpoint: number) =>
    `Run "${runId}": the run's head is of incarnation ${head}, its latest checkpoint of incarnation ${checkpoint}: rows of an earlier run with this id were copied in. Nothing was run. Inspect the run (agent-adapter runs verify) and restore the store from a backup.`,
  corruptCount: (runId: string, counted: number, found: number) =>
    `Run "${runId}": the run's head counts ${counted} call records, but its checkpoint and call log account for ${found}: records are missing (evicted, deleted or restored from an older backup) or the head was changed. Nothing was run. Restore the store or inspect the run; with Redis, use maxmemory-policy noeviction.`,
  corruptGap: (
    runId: string,
    segment: number,
    expected: number,
    found: number,
  ) =>
    `Run "${runId}": the call log of segment ${segment} has a gap (expected record ${expected}, found ${found}): a record is missing. Nothing was run. Restore the store from a backup or inspect the run.`,
  needsDecision: (
    runId: string,
    calls: ReadonlyArray<readonly [string, string]>,
  ) =>
    `Run "${runId}" has ${calls.length} call(s) in doubt that may or may not have run: ${calls
      .map(([tool, why]) => `${tool} (${why})`)
      .join(
        ', ',
      )}. Check each at its system (was the mail sent? the card charged?), then recover with { rerunInDoubt: true }, or fix the state by hand. Nothing was written.`,
  graphChanged: (runId: string, flow: string) =>
    `Run "${runId}": the graph of flow "${flow}" changed since its checkpoint was saved (digest mismatch). Deploy the old flow to finish the run, or fork it onto the new graph.`,
  strangerRerun: (runId: string) =>
    `rerunInDoubt is the run's own decision (or an operator's, through recover): a requester the resume policy lets decide the pending call of run "${runId}" may not rerun its calls in doubt`,
  accessDenied: (runId: string, why: string) =>
    `Run "${runId}": access denied, ${why}. Recover it with the run's own identity.`,
  keyTooShort: (bytes: number) =>
    `The checkpoint key is ${bytes} bytes; at least 32 are required. Generate one with: node -e "console.log(require('crypto').randomBytes(32).toString('base64'))" and give the same key to every worker.`,
  keyRequired: (owner: string, store: string, option: string) =>
    `${owner}: the ${store} is shared between processes, so "${option}" is required: a secret of at least 32 bytes, the same on every worker (e.g. ${option}: process.env.CHECKPOINT_KEY). Generate one with: node -e "console.log(require('crypto').randomBytes(32).toString('base64'))"`,
  badInteger: (option: string, min: number, value: unknown) =>
    min === 1
      ? `"${option}" must be a positive integer, got ${shown(value)}.`
      : `"${option}" must be an integer of at least ${min}, got ${shown(value)}.`,
  badApprovals: () =>
    'approvals must be an ApprovalPort: an object with a decide(request) method.',
  badLogger: () =>
    'logger must be a DurableLogger: an object with warn(message, ...meta) and error(message, ...meta) methods.',
  listenerThrew: (event: string) =>
    `agent-adapter: a "${event}" listener threw`,
  savedListenerFailed: () =>
    'agent-adapter: a checkpoint.saved listener failed',
  renewalFailed: (workerId: string) =>
    `agent-adapter: lease renewal failed for worker ${workerId}`,
  badCanResume: () =>
    'canResume must be a function (request) => boolean | Promise<boolean>.',
  notInRun: () =>
    `idempotencyKey() was called outside a durable run's tool call, so there is no key to give: it gives one only while a run executes a tool (a @Tool method called from a node, or a function registered on the ToolRegistry and called through ctx.call or Call()), never a made-up one. Code that may also run outside a run (a @Tool method called directly, a node's own code) should check inRun() and, outside a run, pass its caller's own key: inRun() ? idempotencyKey() : key.`,
  parked: (runId: string, recoveries: number, superstep: number) =>
    `Run "${runId}" was recovered ${recoveries} time(s) without completing superstep ${superstep} (maxRecoveryAttempts), so it was parked as failed instead of being recovered again. Find out why its workers stop there (npx agent-adapter runs inspect ${runId}), then fork it (runs fork ${runId} --from-step N) to run it again.`,
  maxSteps: (runId: string, maxSteps: number) =>
    `Run "${runId}": the model was called ${maxSteps} time(s), its maxSteps, and still asked for tools, so the loop stopped before another model call. The history so far is in the result: start a new run with it (and a higher maxSteps) to go on.`,
  installCommand: (install: readonly string[]) =>
    `npm install ${install.join(' ')}`,
  packagesMissing: (
    context: string,
    missing: ReadonlyArray<{ name: string; neededFor: readonly string[] }>,
    command: string,
  ) => {
    const each = missing.map(
      ({ name, neededFor }) =>
        `the "${name}" package${neededFor.length ? ` (for ${neededFor.join(', ')})` : ''}`,
    );
    const last = each.pop() ?? '';
    const list = each.length ? `${each.join(', ')} and ${last}` : last;
    return missing.length === 1
      ? `${context} needs ${list}, which is not installed. Install it: ${command}`
      : `${context} needs ${list}, which are not installed. Install them: ${command}`;
  },
  // Flow definitions (FlowError, when the flow is built or compiled) and what nodes do.
  flowName: (name: unknown) =>
    `Flow name ${JSON.stringify(name)} is invalid: use 1-128 letters, digits, "_", ".", ":" or "-".`,
  flowMaxVisits: (flow: string, maxVisits: unknown) =>
    `Flow "${flow}": maxVisits must be a positive integer, got ${String(maxVisits)}.`,
  flowKind: (flow: string, kind: unknown) =>
    `Flow "${flow}": kind must be 'flow' or 'loop', got ${JSON.stringify(kind)}.`,
  nodeName: (flow: string, name: unknown) =>
    `Flow "${flow}": node name ${JSON.stringify(name)} is invalid.`,
  nodeTwice: (flow: string, node: string) =>
    `Flow "${flow}": node "${node}" is defined twice.`,
  nodeSpec: (flow: string, node: string) =>
    `Flow "${flow}": node "${node}" must be a function or Call(...).`,
  nodeMaxVisits: (flow: string, node: string) =>
    `Flow "${flow}": node "${node}" maxVisits must be a positive integer.`,
  nodeCallsFirst: (flow: string, node: string) =>
    `Flow "${flow}": node "${node}" callsFirst must be true or false.`,
  routeFunction: (flow: string, from: string) =>
    `Flow "${flow}": route from "${from}" needs a function.`,
  routeTwice: (flow: string, from: string) =>
    `Flow "${flow}": node "${from}" has two routes; use one route returning several targets.`,
  reducerFunction: (flow: string, key: string) =>
    `Flow "${flow}": reducer for "${key}" must be a function.`,
  flowFrozen: (flow: string) =>
    `Flow "${flow}" is already in use (its digest is fixed); build a new Flow to change it.`,
  callTool: () => 'Call(tool): the tool name must be a non-empty string.',
  graphProblem: (flow: string, problem: string) =>
    `Flow "${flow}": ${problem}.`,
  stateNotObject: (flow: string) =>
    `Flow "${flow}": the stored state is not an object.`,
  nodeReturned: (flow: string, node: string, update: unknown) =>
    `Flow "${flow}": node "${node}" returned ${Array.isArray(update) ? 'an array' : typeof update}; a node returns an object of the state keys it changes, or nothing.`,
  bothWrote: (flow: string, earlier: string, node: string, key: string) =>
    `Flow "${flow}": nodes "${earlier}" and "${node}" both wrote "${key}" in one superstep; declare a reducer for "${key}" or write it from one node.`,
  routePicked: (
    flow: string,
    node: string,
    target: unknown,
    targets: readonly string[],
  ) =>
    `Flow "${flow}": the route from "${node}" picked "${String(target)}", which is not one of its declared targets (${targets.join(', ')}).`,
  invalidState: (
    flow: string,
    violations: ReadonlyArray<{ path: string; messages: string[] }>,
  ) =>
    `Invalid state for flow "${flow}": ${violationsText(violations)}. Nothing was stored; fix the input and start again.`,
  invalidToolArguments: (
    tool: string,
    violations: ReadonlyArray<{ path: string; messages: string[] }>,
  ) =>
    `Invalid arguments for tool "${tool}": ${violationsText(violations)}. The tool did not run.`,
  paused: (runId: string, tool: string) =>
    `Run "${runId}" paused: "${tool}" waits for an approval. Resume it with resume(flow, runId, { approved }).`,
  cancelled: (by: string, reason?: string) =>
    `cancelled by operator (${by})${reason ? `: ${reason}` : ''}`,
  unsealable: (path: string, why: string) =>
    `The value at ${path} cannot be stored durably: ${why}. Use plain JSON data (objects, arrays, strings, finite numbers, booleans, null).`,
  // Keys and encryption (CheckpointKeyError).
  encryptedUnknownKey: (runId: string, what: string, id: string) =>
    `Run "${runId}": the ${what} is encrypted with key id "${id}", which is not in this worker's encryption key ring. Give every worker the same encryptionKey (add an old key to its previous keys after a rotation). Nothing was changed.`,
  noEncryptionKey: (runId: string, what: string) =>
    `Run "${runId}": the ${what} is encrypted, and this worker has no encryption key. Give it the same encryptionKey as the workers that wrote the run. Nothing was changed.`,
  encryptedUnreadable: (runId: string, what: string, why: string) =>
    `Run "${runId}": the ${what} cannot be read: ${why}. Nothing was run from it.`,
  keyId: (id: string) =>
    `Key id "${id}" may only contain letters, digits, "_" and "-".`,
  // Stores (CheckpointStoreUnavailable; a bad option is DurableSetupError).
  foreignTables: (runs: string) =>
    `${runs} exists but the agent-adapter meta table does not: these tables were not made by agent-adapter. Use another tablePrefix/schema. Nothing was changed.`,
  storeClosed: (store: string) => `This ${store} was closed.`,
  storeInterrupted: (store: string, why: string, runId?: string) =>
    `${store}${runId === undefined ? '' : `, run "${runId}"`}: the store failed in a way that may pass (${why}); a write's outcome is unknown until it is read back.`,
  releaseFailed: (runId: string, worker: string) =>
    `Worker "${worker}" could not release run "${runId}" after the store failed it; its lease runs out as usual, then another worker takes it.`,
  storeStayedUnavailable: (runId: string, attempts: number, why: string) =>
    `Run "${runId}": the store stayed unavailable through ${attempts} attempts to write (${why}). This worker stopped driving the run and released it; the write's outcome was read back where the store allowed, and another worker (or a later recoverAll) takes the run over from what is stored.`,
  cannotConnect: (store: string, what: string, why: string) =>
    `${store} cannot connect to the ${what}: ${why}. Check the connection options and that the server is up.`,
  tablesMissing: (runs: string) =>
    `The agent-adapter tables (${runs}, ...) are missing or unreadable. Run the shipped migrations (agentAdapterMigrations()) or create the store with createTables: true.`,
  tablesUnversioned: (runs: string) =>
    `The agent-adapter tables (${runs}, ...) carry no schema version (made by TypeORM synchronize from agentAdapterEntities(), or by something else). Open the store once with createTables: true to stamp them, run the shipped migrations instead, or use another tablePrefix/schema. Nothing was changed.`,
  tablesVersion: (
    runs: string,
    found: string,
    uses: number,
    retired?: string,
  ) =>
    retired === undefined
      ? `The agent-adapter tables (${runs}, ...) have schema version ${found}, but this version of agent-adapter uses ${uses}. They were made by another version: use a matching agent-adapter, or another tablePrefix/schema. Nothing was changed.`
      : `The agent-adapter tables (${runs}, ...) have schema version ${found} (${retired}), a development format this version no longer reads (it uses ${uses}; nothing migrates). Use another tablePrefix/schema, or drop those tables if their runs are not needed. Nothing was changed.`,
  sqliteSharedTransaction: () =>
    'The SQLite connection the store shares has a transaction open (an application transaction on the same DataSource). A checkpoint written inside it could be rolled back after the fact: give the store its own connection (new SQLiteCheckpointStore(path) or a DataSource of its own).',
  redisPrefix: (prefix: string) =>
    `RedisCheckpointStore: prefix "${prefix}" must be non-empty, without "{", "}" or ":" (they would break the hash tags that keep a run in one slot, or let two tenants share keys).`,
  redisRunId: (runId: string) =>
    `RedisCheckpointStore: run id "${runId}" must not contain "{" or "}" (they would break the hash tag that keeps the run in one slot).`,
  // What nodes and models do at run time (executor.ts, tool-loop.ts use these).
  lateCall: (node: string, tool: string) =>
    `Node "${node}" called tool "${tool}" after its superstep ended. Await every ctx.call before the node returns.`,
  unregisteredTool: (node: string, tool: string) =>
    `Node "${node}" called tool "${tool}", which is not registered. Register it on the ToolRegistry the Executor was given.`,
  approvalPolicyAnswer: (tool: string, answer: unknown) =>
    `Tool "${tool}": the approval policy returned ${answer instanceof Promise ? 'a promise' : (JSON.stringify(answer) ?? String(answer))}; it must return true or false, synchronously.`,
  loopNeedsModel: () => 'A tool loop needs a ChatModel (with complete()).',
  loopOtherMessages: (runId: string) =>
    `Run "${runId}" exists and started with other messages: a run id names one conversation. To go on from a finished run, start a new run (another id) with its messages and the new ones; to resume a paused one, pass the messages it started with (or none).`,
  loopRunning: (runId: string) =>
    `Run "${runId}" exists and is running: another worker drives it, or a crash cut it short. Recover it with recoverToolLoop (a worker on startup does), or use another run id.`,
  replyNotMessage: (why: string) =>
    `The model's reply is not a chat message: ${why}`,
  replyRole: (role: string) =>
    `The model's reply has role "${role}"; a reply is an assistant message.`,
  // Call-time argument checks (TypeError: see errors.ts).
  loopMaxSteps: (value: unknown) =>
    `maxSteps must be a positive integer, got ${String(value)}.`,
  loopNoMessages: () => 'messages: a new run needs at least one message.',
  ctxField: (key: string) => `ctx.${key} must be a string.`,
  badDecision: () =>
    'resume(flow, runId, decision): decision.approved must be true or false.',
  // Setup: tool registration, store and model options (DurableSetupError).
  toolName: (name: unknown) =>
    `Tool name ${JSON.stringify(name)} is invalid: use 1-128 letters, digits, "_", ".", ":" or "-".`,
  toolHandler: (tool: string) =>
    `Tool "${tool}": the handler must be a function.`,
  toolTwice: (tool: string) =>
    `Tool "${tool}" is already registered; tool names must be unique.`,
  toolUnknown: (tool: string, known: readonly string[]) =>
    `Tool "${tool}" is not registered. Registered tools: ${known.join(', ') || '(none)'}.`,
  toolOption: (tool: string, option: string, rule: string, got: string) =>
    `Tool "${tool}": ${option} must be ${rule}, got ${got}.`,
  tablePrefix: (prefix: string) =>
    `tablePrefix "${prefix}" may only contain letters, digits and "_" (at most 30).`,
  schemaOnSqlite: () =>
    'The schema option is for Postgres; on SQLite use tablePrefix.',
  schemaName: (schema: string) =>
    `schema "${schema}" must be a plain identifier (letters, digits, "_").`,
  sqlType: (type: unknown) =>
    `SQLCheckpointStore supports TypeORM type "postgres" or "better-sqlite3", not "${String(type)}".`,
  sqlitePath: () =>
    'SQLiteCheckpointStore(path): give the database file path (":memory:" is one process only).',
  openAIOption: (
    option: 'baseUrl' | 'model' | 'timeoutMs' | 'maxRetries',
  ): string =>
    `OpenAIChatModel: ${
      {
        baseUrl:
          'baseUrl must be an http(s) URL, e.g. "http://localhost:11434/v1"',
        model: 'model must be a model name',
        timeoutMs: 'timeoutMs must be a positive integer',
        maxRetries: 'maxRetries must be an integer ≥ 0',
      }[option]
    }.`,
  invalidRunId: (runId: unknown) =>
    `Run id ${shown(runId)} is invalid: use 1-200 letters, digits, "_", ".", ":", "@" or "-".`,
  badWorkerId: (workerId: unknown, max: number) =>
    `workerId must be a non-empty string of at most ${max} characters without control characters (it is stored as the owner of every run this worker drives), got ${typeof workerId === 'string' ? `${shown(workerId)} (${[...workerId].length} characters)` : shown(workerId)}.`,
  previousNotArray: (got: unknown) =>
    // Its kind only: never key material in a message.
    `The key ring's "previous" must be an array of the earlier keys (each a secret or { id, secret }), got ${typeof got === 'object' ? 'an object' : `a ${typeof got}`}: { current: NEW, previous: [OLD] }.`,
  encryptionIsMac: (encryptionId: string, checkpointId: string) =>
    `The encryption key must not be a checkpoint key: encryption key "${encryptionId}" has the secret of checkpoint key "${checkpointId}" (a key that signs records must not also encrypt them: key separation). Give encryptionKey a secret of its own (32+ bytes): node -e "console.log(require('crypto').randomBytes(32).toString('base64'))"`,
  unknownKeyId: (kid: string) =>
    `No key with id "${kid}" is in the checkpoint key ring. Add the old key to the ring's previous keys (checkpointKey: { current, previous: [old] }) so runs signed with it can still be verified.`,
} as const;

/** Class-validator violations as one line: `path: message; message | path: ...`. */
function violationsText(
  violations: ReadonlyArray<{ path: string; messages: string[] }>,
): string {
  return violations
    .map((v) => `${v.path}: ${v.messages.join('; ')}`)
    .join(' | ');
}

/** A value as a message quotes it: a string as JSON (a long one cut short), else its kind. */
function shown(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 60
      ? `${JSON.stringify(value.slice(0, 40))}... (${value.length} characters)`
      : JSON.stringify(value);
  }
  if (typeof value === 'function') return '(a function)';
  if (typeof value !== 'object' || value === null) return String(value);
  return Array.isArray(value) ? '(an array)' : '(an object)';
}
