import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { asError, DurableSetupError, FlowError } from '../errors';
import { requireFeatures } from '../peers/optional-packages';
import { currentNodeScope } from '../exec/call-context';
import { Executor } from '../exec/executor';
import { ToolRegistry } from '../exec/tool.registry';
import { Flow as CoreFlow } from '../flow/flow.builder';
import type { NodeContext, RouteFn } from '../flow/flow.interfaces';
import { DurableMetadataAccessor } from './durable-metadata.accessor';
import { NestMessages } from './durable.messages';
import {
  providerClass,
  providerFeatures,
  type AnyClass,
} from './durable-packages';
import type { FlowMetadata } from './interfaces/flow-options.interface';
import type { NodeOptions } from './interfaces/node-options.interface';
import type { ToolDecoratorOptions } from './interfaces/tool-options.interface';
import { FlowRegistry } from './flow.registry';
import { queueLimits } from '../flow/runner/flow-runner.options';
import { scheduleSettings } from '../flow/schedules/schedule.options';
import type { CronMetadata } from './decorators/durable-cron.decorator';
import type { QueueLimits } from '../flow/runner/queues';
import { DURABLE_RESOLVED_OPTIONS } from './durable.constants';
import type { ResolvedDurableOptions } from './durable.providers';
import { ToolArgs } from './tool-args';

type Method = (this: unknown, ...args: unknown[]) => unknown;
type Instance = Record<string, unknown>;

/**
 * Scans every provider once (at `onModuleInit`, or earlier on the first `FlowRegistry` lookup):
 * `@Tool()` methods are registered on the module's `ToolRegistry` and wrapped on their instance;
 * each `@Flow()` class becomes a core `Flow` built with the same builder calls a framework-free
 * user makes, compiled here so a graph error fails the bootstrap with the class named, and added
 * to the `FlowRegistry`. Discovery only: the runners look flows up in the registry.
 * @internal
 */
@Injectable()
export class DurableExplorer implements OnModuleInit {
  private explored = false;
  private failure?: Error;
  /** Tool name → `Class#method` that defines it (for duplicate messages). */
  private readonly toolOwners = new Map<string, string>();
  private readonly logger = new Logger('DurableExplorer');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly accessor: DurableMetadataAccessor,
    private readonly registry: ToolRegistry,
    private readonly executor: Executor,
    private readonly flows: FlowRegistry,
    @Inject(DURABLE_RESOLVED_OPTIONS)
    private readonly options: ResolvedDurableOptions,
  ) {
    flows.discoverWith(() => this.explore());
  }

  onModuleInit(): void {
    this.explore();
  }

  private explore(): void {
    if (this.explored) return;
    // A failed scan has registered part of the tools and flows: asking again gives the same
    // error, not a misleading "defined twice".
    if (this.failure !== undefined) throw this.failure;
    try {
      const wrappers = this.discovery.getProviders();
      // DurablePackages checked the classes known before the store was made; factory providers
      // made since count too. One error names every missing package, before anything is built.
      requireFeatures(
        providerFeatures(wrappers, this.scanner, this.accessor),
        'DurableModule',
      );
      // A `useExisting` alias points at a wrapper that is listed too: scanning both would
      // register every tool twice.
      for (const wrapper of wrappers) {
        if (wrapper.isAlias) continue;
        this.scanWrapper(wrapper);
      }
    } catch (error) {
      this.failure = asError(error);
      throw error;
    }
    this.explored = true;
  }

  private scanWrapper(wrapper: InstanceWrapper): void {
    const instance: unknown = wrapper.instance;
    if (typeof instance !== 'object' || instance === null) return;
    const proto = Object.getPrototypeOf(instance) as object | null;
    if (!proto || proto === Object.prototype) return;
    const cls = providerClass(wrapper) as AnyClass; // the instance exists: never undefined
    const className = cls.name || String(wrapper.name);
    const moduleName = wrapper.host?.name ?? 'unknown module';
    const flowMeta = this.accessor.getFlowMetadata(cls);
    const singleton = !wrapper.isTransient && wrapper.isDependencyTreeStatic();

    const nodes: Array<[method: string, options: NodeOptions]> = [];
    for (const method of this.scanner.getAllMethodNames(proto)) {
      const fn = (proto as Instance)[method];
      const node = this.accessor.getNodeMetadata(fn);
      const tool = this.accessor.getToolMetadata(fn);
      const where = `${className}#${method}`;
      if (node && tool)
        throw new DurableSetupError(NestMessages.nodeAndTool(where));
      if (node) {
        if (!flowMeta)
          throw new DurableSetupError(NestMessages.nodeOutsideFlow(where));
        if (!singleton)
          throw new DurableSetupError(
            NestMessages.requestScoped(where, '@Flow'),
          );
        nodes.push([method, node]);
      }
      if (tool) {
        if (!singleton)
          throw new DurableSetupError(
            NestMessages.requestScoped(where, '@Tool'),
          );
        this.registerTool(
          instance as Instance,
          fn as Method,
          where,
          `${where} (${moduleName})`,
          method,
          tool,
        );
      }
    }
    if (!flowMeta) {
      if (this.accessor.getCronMetadata(cls).length > 0)
        throw new DurableSetupError(NestMessages.cronOutsideFlow(className));
      return;
    }
    if (!singleton) {
      throw new DurableSetupError(
        NestMessages.requestScoped(className, '@Flow'),
      );
    }
    const flow = this.buildFlow(
      instance as Instance,
      proto as Instance,
      className,
      flowMeta,
      nodes,
    );
    const queue = this.queueOf(flowMeta);
    const schedules = this.schedulesOf(cls, flowMeta.name);
    this.flows.register({
      flow,
      cls,
      where: `${className} (${moduleName})`,
      ...(queue && { queue }),
      ...(schedules.length > 0 && { schedules }),
    });
  }

  /** `@DurableCron`s checked now (expression, time zone, options), so a bad one fails the boot. */
  private schedulesOf(cls: AnyClass, flow: string): CronMetadata[] {
    const declared = this.accessor.getCronMetadata(cls);
    const names = new Set<string>();
    for (const { expression, options } of declared) {
      const { name } = scheduleSettings(flow, expression, options).definition;
      if (names.has(name))
        throw new DurableSetupError(NestMessages.cronTwice(flow, name));
      names.add(name);
    }
    return declared;
  }

  /** `@Flow(name, { queue })` checked, and refused when the module's `queues` names it too. */
  private queueOf(meta: FlowMetadata): QueueLimits | undefined {
    if (meta.queue === undefined) return undefined;
    if (this.options.queues.has(meta.name))
      throw new DurableSetupError(NestMessages.queueTwice(meta.name));
    const owner = `@Flow('${meta.name}')`;
    return queueLimits({ [meta.name]: meta.queue }, { owner }).get(meta.name);
  }

  /** The same builder calls as `new Flow(name).node(...).edge(...).end(...)`, then `compile()`. */
  private buildFlow(
    instance: Instance,
    proto: Instance,
    className: string,
    meta: FlowMetadata,
    nodes: Array<[string, NodeOptions]>,
  ): CoreFlow<object> {
    if (!nodes.length)
      throw new DurableSetupError(NestMessages.noNodes(meta.name, className));
    if (!nodes.some(([, options]) => options.start)) {
      throw new DurableSetupError(NestMessages.noStart(meta.name, className));
    }
    return withClassName(className, () => {
      const flow = new CoreFlow<object>(meta.name, {
        ...(meta.state !== undefined && {
          state: meta.state,
        }),
        ...(meta.maxVisits !== undefined && { maxVisits: meta.maxVisits }),
      });
      for (const [method, options] of nodes) {
        const fn = proto[method] as Method;
        flow.node(
          method,
          (state: object, ctx: NodeContext) =>
            fn.call(instance, state, ctx) as Partial<object> | undefined,
          {
            ...(options.maxVisits !== undefined && {
              maxVisits: options.maxVisits,
            }),
            ...(options.callsFirst !== undefined && {
              callsFirst: options.callsFirst,
            }),
          },
        );
      }
      for (const [method, options] of nodes) {
        if (options.start) flow.start(method);
        const next =
          options.next === undefined
            ? []
            : typeof options.next === 'string'
              ? [options.next]
              : options.next;
        for (const to of next) flow.edge(method, to);
        if (options.route) {
          flow.route(
            method,
            this.routePick(instance, proto, `${className}#${method}`, options),
            options.route.targets,
          );
        }
        if (options.end) flow.end(method);
      }
      flow.compile();
      return flow;
    });
  }

  private routePick(
    instance: Instance,
    proto: Instance,
    where: string,
    options: NodeOptions,
  ): RouteFn<object> {
    const pick = options.route?.pick;
    if (typeof pick === 'function') return pick as RouteFn<object>;
    const method = typeof pick === 'string' ? proto[pick] : undefined;
    if (typeof method !== 'function') {
      throw new DurableSetupError(
        NestMessages.routePickMissing(where, String(pick)),
      );
    }
    return (state) =>
      (method as Method).call(instance, state) as ReturnType<RouteFn<object>>;
  }

  /**
   * Registers the tool and replaces the method on its instance: inside a run (a node's call
   * context) the call goes through the executor; anywhere else it is the plain method.
   */
  private registerTool(
    instance: Instance,
    original: Method,
    where: string,
    owner: string,
    method: string,
    options: ToolDecoratorOptions,
  ): void {
    const { name: given, args: dto, ...toolOptions } = options;
    const name = given ?? method;
    const known = this.toolOwners.get(name);
    if (known)
      throw new DurableSetupError(
        NestMessages.duplicateTool(name, known, owner),
      );
    const args = dto ? new ToolArgs(name, dto) : undefined;
    const parameters = options.parameters ?? args?.schema();
    if (args && !parameters) this.logger.warn(NestMessages.noSchema(where));
    try {
      // What the executor runs: the original method, on its instance, with the logged arguments.
      this.registry.register(
        name,
        (stored: unknown) =>
          original.call(
            instance,
            ...(args
              ? [args.fromPlain(stored)]
              : stored === null
                ? []
                : [stored]),
          ),
        // The registry's own options, passed on as given (it checks them): only the name and
        // the DTO are the decorator's.
        { ...toolOptions, ...(parameters !== undefined && { parameters }) },
      );
    } catch (error) {
      throw new DurableSetupError(
        NestMessages.invalidNode(where, (error as Error).message),
      );
    }
    this.toolOwners.set(name, owner);

    const executor = this.executor;
    const isAsync = original.constructor.name === 'AsyncFunction';
    const wrapped = function (this: unknown, ...given: unknown[]): unknown {
      const scope = currentNodeScope();
      if (!scope) {
        // Outside a run: the plain method (after the DTO check, if any).
        if (!args) return original.apply(this, given);
        let checked: object;
        try {
          checked = args.check(given[0]);
        } catch (error) {
          if (isAsync) return Promise.reject(asError(error));
          throw error;
        }
        return original.call(this, checked, ...given.slice(1));
      }
      // Inside a run: synchronously up to executor.call, so a node's concurrent calls keep the
      // order they were made in (their index in the call log).
      try {
        if (given.length > 1)
          throw new TypeError(NestMessages.toolArity(where, given.length));
        const value = args ? args.toPlain(args.check(given[0])) : given[0];
        return executor.call(scope, name, value);
      } catch (error) {
        return Promise.reject(asError(error));
      }
    };
    Object.defineProperty(wrapped, 'name', { value: method });
    for (const key of Reflect.getMetadataKeys(original) as unknown[]) {
      Reflect.defineMetadata(key, Reflect.getMetadata(key, original), wrapped);
    }
    Object.defineProperty(instance, method, {
      value: wrapped,
      configurable: true,
      writable: true,
      enumerable: false,
    });
  }
}

/** Graph errors from the core builder, with the class that declared the flow added. */
function withClassName<T>(className: string, build: () => T): T {
  try {
    return build();
  } catch (error) {
    if (error instanceof FlowError)
      throw new FlowError(NestMessages.graph(className, error.message));
    throw error;
  }
}
