import type { CanActivate, Type } from '@nestjs/common';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import type { FlowRunnerOptions } from '../../flow/runner/flow-runner.options';
import type { TakeoverOptions } from '../../flow/runner/takeover';
import type { QueueOptions } from '../../flow/runner/queues';
import type { McpClientLike } from '../../exec/mcp/mcp-client';
import type { McpToolsOptions } from '../../exec/mcp/register-mcp-tools';

// One definition of the store descriptors, shared with the operator CLI's store URLs: the module
// creates the store a descriptor names (and closes it on shutdown). With `@nestjs/typeorm`, give
// Postgres your DataSource: `forRootAsync({ inject: [DataSource], useFactory: (dataSource) =>
// ({ store: { type: 'postgres', dataSource }, key }) })`.
import type {
  MemoryStoreDescriptor,
  PostgresStoreDescriptor,
  RedisStoreDescriptor,
  SqliteStoreDescriptor,
  StoreDescriptor,
} from '../../exec/checkpoints/create-store';

export type {
  MemoryStoreDescriptor,
  PostgresStoreDescriptor,
  RedisStoreDescriptor,
  SqliteStoreDescriptor,
};

/** A store the module creates (and closes on shutdown). @publicApi */
export type CheckpointStoreDescriptor = StoreDescriptor;

/** The store types a descriptor may name. @publicApi */
export type CheckpointStoreType = CheckpointStoreDescriptor['type'];

/**
 * Options of `DurableModule.forRoot()` / what a `forRootAsync()` factory returns: the runner's
 * options (`FlowRunnerOptions`: encryption key, worker id, lease, dead letters; checked by the
 * runner's own check, so the module accepts exactly what a runner does), with the store and key
 * under the module's names, and the boot sweep's concurrency.
 * @publicApi
 */
export interface DurableModuleOptions extends Omit<
  FlowRunnerOptions,
  | 'checkpoints'
  | 'checkpointKey'
  | 'events'
  | 'logger'
  | 'approvals'
  | 'canResume'
> {
  /**
   * Where checkpoints and call logs go: a store instance (the application owns it and closes it)
   * or a descriptor (the module creates the store and closes it on shutdown).
   */
  store: CheckpointStore | CheckpointStoreDescriptor;
  /**
   * Signs every checkpoint and call record: a secret of at least 32 bytes, or a key ring for
   * rotation; the same on every worker. Required for every store but the memory one.
   */
  key?: FlowRunnerOptions['checkpointKey'];
  /** Runs recovered at the same time on bootstrap. @default 4 */
  recoveryConcurrency?: number;
  /**
   * On shutdown, how long to wait for the runs driven here to reach a superstep boundary: each
   * stops there, stored and released, so another worker takes it at once (`FlowRunner.drain`).
   * @default 10000
   */
  drainMs?: number;
  /**
   * Continuous takeover: after the boot sweep, this worker keeps looking for due work (runs of the
   * application's flows and tool loops whose owner's lease expired) and finishes it, so a fleet
   * heals when a worker dies without waiting for one to boot. `everyMs` (jittered) and
   * `concurrency` as in `FlowRunner.takeOver`; `false` turns it off. docs/fleet.md.
   * @default on, every fifth of the lease (at most 1000 ms), 4 at a time
   */
  takeover?: false | Pick<TakeoverOptions, 'everyMs' | 'concurrency'>;
  /**
   * Queues' flow control by queue name, for runs started with `FlowRunner.enqueue` (a flow's own
   * queue can also be set with `@Flow(name, { queue })`): the same on every worker. The takeover
   * admits runs from these queues and from each flow's own.
   * @default none
   */
  queues?: Readonly<Record<string, QueueOptions>>;
  /**
   * MCP clients whose tools the module registers in its `ToolRegistry` (`registerMcpTools`, one
   * entry per client), before the boot sweep recovers runs that call them. A registration that
   * fails (a server that cannot list its tools, a bad prefix or override, a name taken) fails the
   * application's start. The application connects each client (in a `forRootAsync` factory, or a
   * provider it injects) and closes it: the module never does. docs/mcp.md.
   * @default none
   */
  mcp?: readonly DurableMcpTools[];
}

/** One MCP client for the module's `mcp` option, with how its tools are named. @publicApi */
export interface DurableMcpTools extends McpToolsOptions {
  /** A connected client (`Client` of `@modelcontextprotocol/sdk`), owned by the application. */
  client: McpClientLike;
}

/**
 * The run viewer: a web page (and its JSON API) listing runs, showing each one's checkpoints and
 * tool calls, and approving, denying or rerunning in-doubt calls. Off unless given.
 *
 * Its actions are refused unless they come from its own page (same origin, JSON body, the page's
 * CSRF token), and every response carries a strict Content-Security-Policy; see docs/nest.md, "The run viewer".
 * @publicApi
 */
export interface DurableViewerOptions {
  /** Where it is mounted (under the application's global prefix). @default '/runs' */
  path?: string;
  /**
   * Who may see and act: a guard class or instance (`CanActivate`), run after the viewer's own
   * checks. Required when `NODE_ENV=production`, unless `privateNetwork` says the app is not
   * reachable from outside. A guard that only checks what a browser sends by itself (a session
   * cookie, Basic auth, a client certificate, the client's IP) identifies the operator but does
   * not stop another site from acting through the operator's browser: that is the viewer's CSRF
   * protection's job, which is always on.
   */
  guard?: Type<CanActivate> | CanActivate;
  /**
   * Acknowledges that, without a guard, anyone who reaches the app may approve and rerun calls
   * (no warning at bootstrap, and allowed with `NODE_ENV=production`).
   */
  privateNetwork?: boolean;
  /**
   * The `Host` names the viewer answers for, each with an optional port (`'runs.example.com'`,
   * `'localhost:3000'`, `'[::1]'`; without a port, any port). A request for another host gets
   * 421, which stops DNS rebinding (a site whose name resolves to your machine). Behind a proxy,
   * list the name users type, and have the proxy pass the `Host` header on.
   * @default ['localhost', '127.0.0.1', '[::1]'] (loopback, any port)
   */
  hosts?: string[];
}

/**
 * Options that shape the module itself (stripped from the injected options).
 * @publicApi
 */
export interface DurableModuleExtras {
  /** Register the module globally, so `FlowRunner` can be injected anywhere. @default true */
  isGlobal: boolean;
  /**
   * Recover every unfinished run of every discovered flow in `onApplicationBootstrap`. Turn off
   * to recover yourself (`RecoveryOrchestrator.sweep()`, `FlowRunner.recoverAll()`). @default true
   */
  recoverOnBoot: boolean;
  /** The run viewer (off unless given). */
  viewer?: DurableViewerOptions;
}

/**
 * A class whose `createDurableOptions()` gives the options (`forRootAsync({ useClass })`).
 * @publicApi
 */
export interface DurableOptionsFactory {
  createDurableOptions(): DurableModuleOptions | Promise<DurableModuleOptions>;
}
