import { Inject, Injectable, Logger } from '@nestjs/common';
import { DurableEvents } from '../events/durable.events';
import type { RunIdentity } from '../exec/durable/records';
import { ToolRegistry } from '../exec/tool.registry';
import type {
  RecoverAllOptions,
  RecoverOptions,
  RecoveryOutcome,
} from '../flow/flow.interfaces';
import type { ChatMessage, ChatModel } from '../loop/chat-model';
import type { ResolveRequest } from '../flow/runner/resolve';
import {
  ToolLoop,
  type ToolLoopResult,
  type ToolLoopRunOptions,
} from '../loop/tool-loop';
import { DURABLE_RESOLVED_OPTIONS } from './durable.constants';
import { NestMessages } from './durable.messages';
import type { ResolvedDurableOptions } from './durable.providers';
import { DurableSetupError } from '../errors';
import { FlowRegistry } from './flow.registry';
import type { StreamEntry } from '../exec/durable/stream-entries';
import type { StreamReadOptions } from '../flow/runner/run-stream';

/** What an agent (a named tool loop) is made of. @publicApi */
export interface ToolLoopDefinition {
  /** The model that answers and picks tools. */
  model: ChatModel;
  /**
   * The `@Tool` names this agent's model sees and may call (their DTO gives each one's JSON
   * schema). @default every `@Tool` of the application
   */
  tools?: readonly string[];
  /** Publish the run's messages to its stream as they are saved (see `ToolLoopOptions.stream`). */
  stream?: boolean;
}

/**
 * One named tool loop of the application, on the module's store, key, events and leases. Its runs
 * are recovered on bootstrap like flows' runs.
 * @publicApi
 */
export class DurableToolLoop {
  private built?: ToolLoop;

  /** @internal */
  constructor(
    readonly name: string,
    private readonly build: () => ToolLoop,
  ) {}

  /** The framework-free `ToolLoop` (built on first use, once every `@Tool` is registered). */
  get core(): ToolLoop {
    return (this.built ??= this.build());
  }

  /** Starts a run, or continues one by id (a paused run with `decision`); see `ToolLoop.run`. */
  async run(
    messages: readonly ChatMessage[],
    options: ToolLoopRunOptions = {},
  ): Promise<ToolLoopResult> {
    return this.core.run(messages, options);
  }

  /** Goes on with a run after a crash; see `ToolLoop.recover`. */
  recover(
    runId: string,
    options: RecoverOptions = {},
  ): Promise<ToolLoopResult> {
    return this.core.recover(runId, options);
  }

  /** Says what calls in doubt really did, then goes on; see `ToolLoop.resolve`. */
  resolve(
    runId: string,
    request: ResolveRequest,
    options: { ctx?: RunIdentity } = {},
  ): Promise<ToolLoopResult> {
    return this.core.resolve(runId, request, options);
  }

  /** Recovers every unfinished run of this loop: run id → result or error. */
  async recoverAll(
    options: RecoverAllOptions = {},
  ): Promise<Map<string, ToolLoopResult | Error>> {
    return this.core.recoverAll(options);
  }

  /** Recovers every unfinished run of this loop, yielding each outcome as it settles; see `ToolLoop.recoverEach`. */
  recoverEach(
    options: RecoverAllOptions = {},
  ): AsyncGenerator<RecoveryOutcome<ToolLoopResult>, void, undefined> {
    return this.core.recoverEach(options);
  }

  /** The run's stream, each entry once, in order; see `ToolLoop.stream` and `streamEvents`. */
  stream(
    runId: string,
    options: StreamReadOptions = {},
  ): AsyncGenerator<StreamEntry, void, undefined> {
    return this.core.stream(runId, options);
  }

  /** A run's latest saved state, without running anything. */
  get(
    runId: string,
    options: { ctx?: RunIdentity } = {},
  ): Promise<ToolLoopResult> {
    return this.core.get(runId, options);
  }

  /** @internal */
  close(): void {
    this.built?.close();
  }

  /** @internal Drains the loop's runner (`FlowRunner.drain`), if it was ever built. */
  drain(deadlineMs: number): Promise<number> {
    return this.built?.runner.drain({ deadlineMs }) ?? Promise.resolve(0);
  }
}

/**
 * Defines the application's tool loops (agents): `define(name, { model, tools })` in a provider's
 * constructor or `onModuleInit` gives a `DurableToolLoop` whose runs are checkpointed in the
 * module's store, and recovered on bootstrap. The model sees the `@Tool` methods named in `tools`.
 * @publicApi
 */
@Injectable()
export class ToolLoopRunner {
  private readonly logger = new Logger('DurableToolLoops');
  private readonly loops = new Map<string, DurableToolLoop>();
  private swept = false;

  constructor(
    @Inject(DURABLE_RESOLVED_OPTIONS)
    private readonly options: ResolvedDurableOptions,
    private readonly registry: ToolRegistry,
    private readonly events: DurableEvents,
    private readonly flows: FlowRegistry,
  ) {}

  /** Defines the loop `name` (once per application). */
  define(name: string, definition: ToolLoopDefinition): DurableToolLoop {
    if (typeof name !== 'string' || !name)
      throw new DurableSetupError(NestMessages.loopName(name));
    if (this.loops.has(name))
      throw new DurableSetupError(NestMessages.duplicateLoop(name));
    if (typeof definition?.model?.complete !== 'function')
      throw new DurableSetupError(NestMessages.loopModel(name));
    const tools = definition.tools ? [...definition.tools] : undefined;
    const loop = new DurableToolLoop(name, () => {
      // Every @Tool is registered by now (the scan runs on first use at the latest).
      if (this.flows.get(name))
        throw new DurableSetupError(NestMessages.loopIsFlow(name));
      let registry: ToolRegistry;
      try {
        registry = tools ? this.registry.only(tools) : this.registry;
      } catch (error) {
        throw new DurableSetupError(
          NestMessages.loopTools(name, (error as Error).message),
        );
      }
      return new ToolLoop(definition.model, registry, {
        ...this.options.runner,
        name,
        events: this.events,
        ...(definition.stream !== undefined && { stream: definition.stream }),
      });
    });
    this.loops.set(name, loop);
    if (this.swept) this.logger.warn(NestMessages.lateLoop(name));
    return loop;
  }

  /** A defined loop by name. */
  get(name: string): DurableToolLoop | undefined {
    return this.loops.get(name);
  }

  /** Every defined loop. */
  all(): DurableToolLoop[] {
    return [...this.loops.values()];
  }

  /** @internal Called by the boot sweep: loops defined later are not swept at boot. */
  markSwept(): void {
    this.swept = true;
  }

  /** Stops lease renewal of every loop (on shutdown). */
  close(): void {
    for (const loop of this.loops.values()) loop.close();
  }

  /** @internal Drains every loop (on shutdown): each resolves with the runs it still drove. */
  drain(deadlineMs: number): Array<Promise<number>> {
    return [...this.loops.values()].map((loop) => loop.drain(deadlineMs));
  }
}
