/** Message factories of the Nest layer: every misuse says where it is and what to do. @internal */
export const NestMessages = {
  noAsyncVariant: () =>
    'DurableModule.forRootAsync() needs one of useFactory, useClass or useExisting (with imports/inject as needed), e.g. forRootAsync({ inject: [ConfigService], useFactory: (config) => ({ store: { type: "sqlite", path: config.get("RUNS_DB") }, key: config.get("CHECKPOINT_KEY") }) }).',
  noStore: (valid: readonly string[]) =>
    `DurableModule: the "store" option is missing. Give a CheckpointStore instance or a descriptor { type: ${valid.map((t) => `"${t}"`).join(' | ')} }.`,
  unknownStoreType: (type: unknown, valid: readonly string[]) =>
    `DurableModule: unknown store type ${JSON.stringify(type)}. Valid types: ${valid.map((t) => `"${t}"`).join(', ')}; or pass a CheckpointStore instance.`,
  storeOption: (type: string, problem: string) =>
    `DurableModule: store { type: "${type}" }: ${problem}.`,
  requestScoped: (where: string, kind: '@Flow' | '@Tool') =>
    `${where} cannot be a durable ${kind}: it is defined in a non-static (request-scoped or transient) provider. Durable flows and tools must be singletons: a run outlives the request, and recovery after a crash has no request. Move the method to a default-scoped provider.`,
  cronTwice: (flow: string, name: string) =>
    `@Flow('${flow}'): two @DurableCron schedules are named "${name}": give each its own name (the first defaults to the flow's).`,
  cronOutsideFlow: (className: string) =>
    `@DurableCron on ${className}, which is not a @Flow: put it on the @Flow class whose runs it starts.`,
  cronDeclareFailed: (names: string, error: string) =>
    `Could not store the schedules ${names}: ${error}. Trying again in 5 s; until then this worker does not fire them.`,
  cronWithoutTakeover: (names: string) =>
    `Schedules ${names} are declared, but this worker's takeover is off: a worker with it on fires their ticks.`,
  mcpNotList: (got: string) =>
    `DurableModule: the "mcp" option must be a list, got ${got}. Give mcp: [{ client, prefix?, overrides? }].`,
  mcpNoClient: (index: number) =>
    `DurableModule: mcp[${index}] has no client with listTools() and callTool(). Give { client } a connected MCP Client (@modelcontextprotocol/sdk).`,
  mcpFailed: (index: number, prefix: unknown, why: string) =>
    `DurableModule: mcp[${index}]${typeof prefix === 'string' && prefix ? ` (prefix "${prefix}")` : ''}: its MCP tools could not be registered, so the application does not start: ${why}`,
  queueTwice: (name: string) =>
    `DurableModule: queue "${name}" is configured twice, in @Flow('${name}', { queue }) and in the module's queues. Keep one.`,
  duplicateFlow: (name: string, first: string, second: string) =>
    `Flow "${name}" is defined twice: by ${first} and by ${second}. Flow names must be unique (they are stored in every checkpoint).`,
  duplicateTool: (name: string, first: string, second: string) =>
    `Tool "${name}" is defined twice: by ${first} and by ${second}. Tool names must be unique: give one of them @Tool({ name: '...' }).`,
  nodeOutsideFlow: (where: string) =>
    `${where} has @Node() but its class has no @Flow(name): add @Flow('...') to the class.`,
  nodeAndTool: (where: string) =>
    `${where} has both @Node() and @Tool(): a node is not a tool. Move the tool to a provider the flow injects.`,
  noStart: (flow: string, cls: string) =>
    `Flow "${flow}" (${cls}) has no start node: mark the first node @Node({ start: true }).`,
  noNodes: (flow: string, cls: string) =>
    `Flow "${flow}" (${cls}) has no @Node() methods.`,
  routePickMissing: (where: string, pick: string) =>
    `${where}: route.pick names method "${pick}", which the class does not have.`,
  graph: (cls: string, message: string) => `${message} (in ${cls})`,
  invalidNode: (where: string, message: string) => `${where}: ${message}`,
  unknownFlow: (ref: string, known: readonly string[]) =>
    `${ref} is not a discovered @Flow. Known flows: ${known.length ? known.map((n) => `"${n}"`).join(', ') : 'none'}. Decorate the class with @Flow('name') and list it in a module's providers.`,
  runOfUnknownFlow: (runId: string, flow: string) =>
    `Run "${runId}" belongs to flow "${flow}", which this application does not define (no @Flow('${flow}') provider).`,
  toolArity: (where: string, count: number) =>
    `${where} was called with ${count} arguments inside a run: a durable tool takes one arguments object. Pass { ... } instead.`,

  recovered: (
    flow: string,
    runId: string,
    status: string,
    step: number,
    calls?: string,
  ) =>
    `Run "${runId}" of flow "${flow}" recovered: ${status} at step ${step}${calls ? `; ${calls}` : ''}.`,
  recoveredFailed: (
    flow: string,
    runId: string,
    step: number,
    error: { name: string; message: string } | undefined,
    calls?: string,
  ) =>
    `Run "${runId}" of flow "${flow}" recovered and ended failed at step ${step}${error ? `: ${error.name}: ${error.message}` : ''}${calls ? `; ${calls}` : ''}.`,
  recoveredPaused: (
    flow: string,
    runId: string,
    pending?: { deadline?: number; onTimeout?: 'deny' | 'approve' | 'fail' },
  ) =>
    `Run "${runId}" of flow "${flow}" is paused, waiting for an approval: resume it with its decision${pending?.deadline !== undefined && pending.onTimeout ? ` by its deadline (${new Date(pending.deadline).toISOString()}), when the clock ${{ deny: 'denies the call', approve: 'approves the call', fail: 'fails the run' }[pending.onTimeout]}` : ''}.`,
  recoveredSleeping: (flow: string, runId: string, wakeAt: number) =>
    `Run "${runId}" of flow "${flow}" sleeps until ${new Date(wakeAt).toISOString()}: a worker with a takeover wakes it then.`,
  needsDecision: (
    flow: string,
    runId: string,
    calls: ReadonlyArray<readonly [string, string]>,
  ) =>
    `Run "${runId}" of flow "${flow}" needs a decision: call(s) in doubt ${calls.map(([tool, why]) => `${tool} (${why})`).join(', ')}. Check each at its system, then say what each did (FlowRunner.resolve, the run viewer, or npx agent-adapter runs resolve ${runId} --call <callId> --ran | --not-run), or rerun them with FlowRunner.recover(flow, "${runId}", { rerunInDoubt: true }). Nothing was run or written.`,
  leaseHeld: (
    flow: string,
    runId: string,
    owner: string,
    until: number,
    retry: boolean,
  ) =>
    `Run "${runId}" of flow "${flow}": worker "${owner}" holds its lease until ${new Date(until).toISOString()} (it may be alive), so it was not taken; ${retry ? 'retrying then' : 'not retried by this sweep: sweep again after then, or recover it with force only if that worker is gone'}.`,
  lostRace: (flow: string, runId: string, owner: string | undefined) =>
    `Run "${runId}" of flow "${flow}": another worker${owner ? ` (${owner})` : ''} recovered it first; nothing to do here.`,
  resweep: (at: number, runs: number) =>
    `${runs} run(s) held by other workers; looking again at ${new Date(at).toISOString()}.`,
  accessDenied: (flow: string, runId: string, message: string) =>
    `Run "${runId}" of flow "${flow}" was not recovered: ${message}`,
  failed: (flow: string, runId: string, error: Error) =>
    `Run "${runId}" of flow "${flow}" could not be recovered: ${error.name}: ${error.message}`,
  interrupted: (flow: string, runId: string) =>
    `Run "${runId}" of flow "${flow}" was interrupted by shutdown; another worker recovers it once its lease expires.`,
  sweepFailed: (flow: string, error: Error) =>
    `Recovery of flow "${flow}" could not list its runs: ${error.name}: ${error.message}`,
  sweepDone: (
    sweep: 'bootstrap' | 'resweep' | 'manual',
    flows: number,
    loops: number,
    runs: number,
    counts: Readonly<Record<string, number>>,
  ) =>
    `${SWEEP_LABEL[sweep]} done: ${runs} unfinished run(s) in ${[
      ...(flows || !loops ? [`${flows} flow(s)`] : []),
      ...(loops ? [`${loops} tool loop(s)`] : []),
    ].join(' and ')}${runs ? `: ${countsText(counts)}` : ''}.`,
  loopName: (name: unknown) =>
    `ToolLoopRunner.define(name, ...): the name must be a non-empty string, got ${JSON.stringify(name)}.`,
  duplicateLoop: (name: string) =>
    `Tool loop "${name}" is defined twice: loop names must be unique (they are stored in every checkpoint).`,
  loopModel: (name: string) =>
    `Tool loop "${name}": "model" must be a ChatModel (an object with complete()), e.g. new OpenAIChatModel({ baseUrl, model }).`,
  loopIsFlow: (name: string) =>
    `Tool loop "${name}" has the name of a @Flow: runs are found by name, so give the loop another one.`,
  loopTools: (name: string, message: string) =>
    `Tool loop "${name}": ${message} Name @Tool methods (their @Tool({ name }) or method name).`,
  lateLoop: (name: string) =>
    `Tool loop "${name}" was defined after the bootstrap recovery: its unfinished runs were not recovered. Define loops in a constructor or onModuleInit.`,
  viewerOptions: () =>
    'DurableModule: "viewer" must be an object: { path?, guard?, privateNetwork?, hosts? }.',
  viewerHosts: (value: unknown) =>
    `DurableModule: viewer.hosts must be a non-empty array of host names, each with an optional port (e.g. ["runs.example.com", "localhost:3000", "[::1]"]); got ${JSON.stringify(value)}.`,
  viewerHostRefused: (host: string | undefined, allowed: readonly string[]) =>
    `The run viewer does not answer for Host ${JSON.stringify(host ?? '')}: it answers for ${allowed.join(', ')} (a name without a port: any port). If it is meant to be reached by this name, add it to DurableModule.forRoot({ viewer: { hosts: [...] } }). The check stops DNS rebinding.`,
  viewerCrossSite: (problems: readonly string[]) =>
    `The run viewer refused this request as possibly cross-site, and nothing was run: ${problems.join('; ')}. Its actions are only taken from its own page (same origin, JSON body, the page's CSRF token).`,
  viewerUnguardedWarning: (path: string) =>
    `The run viewer at "${path}" has no guard: anyone who can reach this application can see every run and approve, deny or rerun tool calls (a card charged again). Give viewer.guard (a CanActivate that identifies the operator), or viewer.privateNetwork: true if only a private network reaches the app. With NODE_ENV=production it is refused at bootstrap.`,
  viewerBody: (action: string) =>
    `${action} takes a JSON object body (content-type: application/json), e.g. {}.`,
  viewerPath: (path: unknown) =>
    `DurableModule: viewer.path ${JSON.stringify(path)} is not a URL path (letters, digits, "/", ".", "_", "~", "-").`,
  viewerUnguarded: () =>
    'DurableModule: the run viewer can approve, deny and rerun calls, and NODE_ENV is "production" but it has no guard. Give viewer.guard (a CanActivate), or viewer.privateNetwork: true if the app is only reachable from a private network.',
  takeoverStarted: (sources: number, everyMs: number) =>
    `Takeover: looking for due runs of ${sources} flow(s) and tool loop(s) every ~${everyMs} ms (runs whose worker's lease expired are finished here).`,
  shutdown: (left: number) =>
    left === 0
      ? 'Shut down: every run driven here stopped at a superstep boundary, stored and released; another worker takes each over at once.'
      : `Shut down: ${left} run(s) were still in a superstep at the drain deadline; their leases are no longer renewed, so another worker takes them over once they expire.`,
  listenerThrew: (event: string) => `A "${event}" listener threw`,
  noSchema: (where: string) =>
    `${where}: @Tool({ args }) is validated, but models see no JSON schema for it: npm install class-validator-jsonschema (or give "parameters").`,
  healthTimeout: (timeoutMs: number) =>
    `the store did not answer within ${timeoutMs} ms`,
  viewerCsrfToken: () =>
    'viewerPage: a CSRF token is base64url with dots (the one the viewer made for this page)',
  viewerUnknownFlow: (runId: string, flow: string) =>
    `Run "${runId}" belongs to "${flow}", which this application defines neither as a @Flow nor as a tool loop.`,
  viewerStatus: (statuses: readonly string[]) =>
    `status must be one of ${statuses.join(', ')}`,
  viewerLimit: () => 'limit must be between 1 and 50',
  viewerDecisionField: (key: string) =>
    `${key} must be a string of at most 200 characters`,
  viewerScheduleName: (name: string) =>
    `No schedule can be named ${JSON.stringify(name.length > 120 ? `${name.slice(0, 120)}…` : name)} (1-100 letters, digits, "_", "." or "-"): nothing was changed.`,
  viewerResolveField: (key: string) =>
    `resolve takes { call, ran, result?, error?, by, reason }: "${key}" is not one of them`,
  streamOffset: (got: string) =>
    `The stream offset ${JSON.stringify(got)} is not one: give the id of the last event received (Last-Event-ID), or ?from= the first offset wanted, a whole number of at least 0.`,
} as const;

const SWEEP_LABEL = {
  bootstrap: 'Bootstrap recovery',
  resweep: 'Lease re-sweep (runs held at bootstrap)',
  manual: 'Recovery sweep',
} as const;

const OUTCOME_WORDS: Readonly<Record<string, string>> = {
  recovered: 'recovered',
  needsDecision: 'need a decision',
  held: 'held by another worker',
  elsewhere: 'recovered by another worker first',
  accessDenied: 'refused (identity)',
  failed: 'failed',
};

/** "2 recovered, 1 need a decision": the outcomes that happened, in a fixed order. */
function countsText(counts: Readonly<Record<string, number>>): string {
  return Object.entries(OUTCOME_WORDS)
    .filter(([kind]) => counts[kind])
    .map(([kind, words]) => `${counts[kind]} ${words}`)
    .join(', ');
}
