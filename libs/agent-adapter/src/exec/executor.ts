import { createHash } from 'node:crypto';
import {
  FlowError,
  RunPaused,
  ToolDenied,
  ToolFailed,
  UnsealableValue,
} from '../errors';
import { assertJson, canonicalJson, type Json } from './durable/canonical-json';
import type { CallContent, CallIdentity, CallOutcome } from './durable/records';
import { nodeStorage, toolStorage, type NodeScope } from './call-context';
import { deriveIdempotencyKey } from './idempotency-key';
import type { ToolDefinition, ToolRegistry } from './tool.registry';

/**
 * The only way a tool runs inside a run. Each call is logged `started` before it runs and `done`
 * (or `unrecordable`) after; after a recovery a finished call with the same tool and arguments
 * replays its stored outcome instead of running.
 * @publicApi
 */
export class Executor {
  constructor(readonly registry: ToolRegistry) {}

  /** Runs (or replays) one call of `tool` made by the node of `scope`. */
  call(scope: NodeScope, tool: string, args: unknown): Promise<unknown> {
    const step = scope.step;
    if (step.closed) {
      const late = Promise.reject(
        new FlowError(
          `Node "${scope.node}" called tool "${tool}" after its superstep ended. Await every ctx.call before the node returns.`,
          step.runId,
        ),
      );
      // Handled here too: an un-awaited late call must not crash the process (unhandled rejection).
      late.catch(() => undefined);
      return late;
    }
    const call = this.run(scope, tool, args);
    step.inflight.add(call);
    void call.catch(() => undefined).finally(() => step.inflight.delete(call));
    return call;
  }

  private async run(
    scope: NodeScope,
    tool: string,
    args: unknown,
  ): Promise<unknown> {
    const step = scope.step;
    const definition = this.registry.get(tool);
    if (!definition) {
      throw new FlowError(
        `Node "${scope.node}" called tool "${tool}", which is not registered. Register it on the ToolRegistry the Executor was given.`,
        step.runId,
      );
    }
    const identity: CallIdentity = {
      node: scope.node,
      index: scope.nextIndex++,
      tool,
    };
    const argsText = canonicalJson(args ?? null, `${tool}(args)`);
    const argsHash = createHash('sha256').update(argsText).digest('base64url');

    const prior = step.replay?.lookup(identity);
    if (prior?.kind === 'done' && prior.argsHash === argsHash) {
      step.replayed.push(identity);
      return deliver(tool, step.runId, prior.outcome, true);
    }
    if (prior?.kind === 'done') step.unreplayed.push(identity);
    if (prior?.kind === 'inDoubt') step.rerun.push(identity);

    if (step.log.failure !== undefined) throw step.log.failure;
    const base = { ...identity, argsHash };
    const decision = definition.approval
      ? step.decisions?.find(
          (d) =>
            d.node === identity.node &&
            d.index === identity.index &&
            d.tool === tool &&
            d.argsHash === argsHash,
        )
      : undefined;
    // A superstep that is pausing for an approval starts nothing more, except a call whose
    // decision is already sealed (it must be spent now, or it would be asked for again).
    if (step.paused && !decision) throw new RunPaused(step.runId, tool);
    if (definition.approval && !decision) {
      // Nothing ran: the call is logged `pending` (with the checkpoint that pauses the run). A
      // decision covers one call with these exact arguments; changed arguments ask again.
      const args = JSON.parse(argsText) as Json;
      step.log.finished(step.superstep, {
        ...base,
        phase: 'pending',
        args,
        reason: 'awaiting approval',
        at: Date.now(),
      });
      step.paused ??= { ...identity, args, argsHash };
      throw new RunPaused(step.runId, tool);
    }
    if (decision && !decision.approved) {
      // Denied: recorded as the call's outcome, so a recovery gives the node the same answer.
      const denied: CallOutcome = {
        ok: false,
        error: {
          name: 'ToolDenied',
          message: `"${tool}" was denied${decision.by ? ` by ${decision.by}` : ''}${decision.reason ? `: ${decision.reason}` : ''}`,
        },
      };
      step.log.finished(step.superstep, {
        ...base,
        phase: 'done',
        outcome: denied,
        at: Date.now(),
      });
      return deliver(tool, step.runId, denied, false);
    }
    await step.log.started(step.superstep, {
      ...base,
      phase: 'started',
      args: JSON.parse(argsText) as Json,
      at: Date.now(),
    });

    const outcome = await this.invoke(definition, scope, identity, argsText);
    step.log.finished(step.superstep, record(base, outcome));
    return deliver(
      tool,
      step.runId,
      outcome.sealed,
      false,
      outcome.cause,
      outcome.value,
    );
  }

  private async invoke(
    definition: ToolDefinition,
    scope: NodeScope,
    identity: CallIdentity,
    argsText: string,
  ): Promise<Invoked> {
    const step = scope.step;
    const toolScope = {
      runId: step.runId,
      tool: definition.name,
      identity: step.identity,
      idempotencyKey: deriveIdempotencyKey(
        step.ring,
        step.idemKid,
        step.runId,
        step.incarnation,
        step.superstep,
        identity,
      ),
    };
    try {
      // The tool gets its own copy of exactly the logged arguments, and runs outside the node's
      // scope: tools it calls itself are plain calls, so replaying it cannot shift call indexes.
      const value = await nodeStorage.exit(() =>
        toolStorage.run(toolScope, () =>
          definition.handler(JSON.parse(argsText)),
        ),
      );
      try {
        assertJson(
          value === undefined ? null : value,
          `${definition.name}(result)`,
        );
        return {
          sealed:
            value === undefined
              ? { ok: true }
              : { ok: true, value: value as Json },
          value,
        };
      } catch (error) {
        const reason =
          error instanceof UnsealableValue ? error.message : String(error);
        return { sealed: { ok: true }, value, unrecordable: reason };
      }
    } catch (error) {
      const e = error instanceof Error ? error : new Error(String(error));
      return {
        sealed: { ok: false, error: { name: e.name, message: e.message } },
        cause: error,
      };
    }
  }
}

interface Invoked {
  sealed: CallOutcome;
  value?: unknown;
  cause?: unknown;
  /** Why the result could not be sealed: the call is recorded `unrecordable`. */
  unrecordable?: string;
}

function record(
  base: CallIdentity & { argsHash: string },
  outcome: Invoked,
): CallContent {
  return outcome.unrecordable !== undefined
    ? {
        ...base,
        phase: 'unrecordable',
        reason: outcome.unrecordable,
        at: Date.now(),
      }
    : { ...base, phase: 'done', outcome: outcome.sealed, at: Date.now() };
}

function deliver(
  tool: string,
  runId: string,
  outcome: CallOutcome,
  replayed: boolean,
  cause?: unknown,
  live?: unknown,
): unknown {
  if (!outcome.ok) {
    const Failure =
      outcome.error.name === 'ToolDenied' ? ToolDenied : ToolFailed;
    throw new Failure(
      tool,
      outcome.error.name,
      outcome.error.message,
      runId,
      replayed,
      cause,
    );
  }
  if (!replayed) return live;
  // A replayed value is a fresh copy each time, so node code cannot change what is stored.
  return outcome.value === undefined
    ? undefined
    : (JSON.parse(JSON.stringify(outcome.value)) as unknown);
}
