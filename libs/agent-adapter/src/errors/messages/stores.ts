/** Stores and their packages (CheckpointStoreUnavailable; a bad option is DurableSetupError). */
export const StoreMessages = {
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
  foreignTables: (runs: string) =>
    `${runs} exists but the agent-adapter meta table does not: these tables were not made by agent-adapter. Use another tablePrefix/schema. Nothing was changed.`,
  storeClosed: (store: string) => `This ${store} was closed.`,
  queuesNeedPool: () =>
    'Queues on Postgres need the pg pool of a TypeORM DataSource (an admission is a transaction on one connection); this DataSource has none. Nothing was admitted.',
  redisQuitTimedOut: () => 'QUIT timed out',
  redisTenantHealing: (runId: string) =>
    `enqueue of ${runId} not taken: the tenant's index is being rebuilt after its master changed (a failover or a restart), and its dedupe keys with it; try again`,
  redisQueueHealing: (queue: string) =>
    `queue "${queue}": no run admitted: the tenant's index is being rebuilt after its master changed (a failover or a restart), and the queue's counts with it; the next look admits`,
  failoverMayHaveLost: (
    runId: string,
    lost: string,
    now: string,
    inDoubt = 0,
  ) =>
    `Run "${runId}" was last written by a Redis master (replication id ${lost.slice(0, 12)}…) that a promoted replica (now ${now.slice(0, 12)}…) replaced: writes the old master acknowledged but had not replicated may be lost, among them a call's started record whose tool ran, which recovery would run again${inDoubt ? `; ${inDoubt} call(s) the store holds are in doubt besides` : ''}. Mark it restored (runs restored --failover): recovery then runs no call that may have been lost without a decision on it (resolve, the viewer, runs resolve); or cancel it (runs cancel), or go on from what the store holds with recover(..., { rerunInDoubt: true }) (recover --rerun-in-doubt). Nothing was written. A store with the replicas option (WAIT) is not exposed to this.`,
  redisReplicasBehind: (
    runId: string,
    acked: number,
    wanted: number,
    timeoutMs: number,
  ) =>
    `RedisCheckpointStore: run "${runId}": the write reached ${acked} of the ${wanted} replica(s) it waits for within ${timeoutMs} ms (WAIT): it is on the master only and a failover could lose it, so it is not confirmed.`,
  redisReplicasOption: (why: string) =>
    `RedisCheckpointStore option replicas: ${why}. Give { count: <replicas that must acknowledge each run write, an integer >= 1>, timeoutMs: <how long to wait for them, an integer >= 1> }.`,
  redisRefusedUnknown: (runId: string, code: string) =>
    `RedisCheckpointStore: run "${runId}": the write was refused (${code}) and nothing was written; retry it.`,
  storeInterrupted: (store: string, why: string, runId?: string) =>
    `${store}${runId === undefined ? '' : `, run "${runId}"`}: the store failed in a way that may pass (${why}); a write's outcome is unknown until it is read back.`,
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
  // Store descriptors ({ type, ... }): the Nest module and the CLI word a problem for their setting.
  storeTypeUnknown: (type: unknown, valid: readonly string[]) =>
    `Unknown store type ${JSON.stringify(type)}. Valid types: ${valid.map((t) => `"${t}"`).join(', ')}.`,
  storeDescriptor: (type: string, problem: string) =>
    `Store { type: "${type}" }: ${problem}.`,
  // What a descriptor gets wrong: a clause, put in the sentence of storeDescriptor (or NestMessages.storeOption).
  sqliteDescriptorPath: () =>
    'give "path", the database file (its folder must exist)',
  postgresDescriptorSource: () =>
    'give exactly one of "dataSource" (your TypeORM DataSource) or "url"',
  postgresPoolSizeWithDataSource: () =>
    '"poolSize" sizes the pool of a store made from "url"; give your DataSource its poolSize in its own options',
  postgresPoolSize: (poolSize: unknown) =>
    `"poolSize" must be a positive integer, got ${JSON.stringify(poolSize)}`,
  postgresPreparedStatements: (preparedStatements: unknown) =>
    `"preparedStatements" must be true or false, got ${JSON.stringify(preparedStatements)}`,
  redisUrlAndClient: () => 'give "url" or "client", not both',
  redisClientFactory: () =>
    '"client" must be a function returning a client, e.g. () => new Redis(url)',
  // agent-adapter/testing: the conformance suite and the crashing store.
  simulatedCrash: (where: string | undefined) =>
    `simulated crash ${where ?? '(worker is dead)'}`,
  conformanceNeedsFramework: () =>
    'describeCheckpointStoreConformance needs describe, it and afterAll: run it under jest (or vitest with globals: true), or pass them as its second argument',
  streamEmptyAppend: (runId: string) =>
    `appendStream for run "${runId}" was given no entries: give at least one.`,
} as const;
