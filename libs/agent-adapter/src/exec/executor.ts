import { hash } from 'node:crypto';
import {
  asError,
  FlowError,
  RecoveryNeedsDecision,
  RunPaused,
  RunSleeping,
} from '../errors';
import { Messages } from '../errors/messages';
import { checkVerdict, type ApprovalPort } from './approvals';
import { canonical, type CanonicalText } from './durable/canonical-json';
import type {
  CallIdentity,
  CallOutcome,
  SyncDecision,
} from './durable/records';
import { outsideCalls, type NodeScope } from './call-context';
import { traced, type SpanLike } from '../observability/tracing';
import { deriveIdempotencyKey } from './idempotency-key';
import { promised } from './promised';
import type { ToolDefinition, ToolRegistry } from './tool.registry';
import {
  backoff,
  deliver,
  deniedOutcome,
  invokeTool,
  needsApproval,
  record,
  sleep,
  type Base,
} from './tool-attempt';

/**
 * The only way a tool runs inside a run. Each call is logged `started` before it runs and `done`
 * (or `unrecordable`) after; after a recovery a finished call with the same tool and arguments
 * replays its stored outcome instead of running. The tool's policies (approval, retry, timeout)
 * are applied here, each step logged in the same call log.
 * @publicApi
 */
export class Executor {
  constructor(readonly registry: ToolRegistry) {}

  /** Runs (or replays) one call of `tool` made by the node of `scope`. */
  call(scope: NodeScope, tool: string, args: unknown): Promise<unknown> {
    const step = scope.step;
    if (step.closed) {
      const late = Promise.reject(
        new FlowError(Messages.lateCall(scope.node, tool), step.runId),
      );
      // Handled here too: an un-awaited late call must not crash the process (unhandled rejection).
      late.catch(() => undefined);
      return late;
    }
    const call = traced(
      'agent-adapter.tool',
      () => ({
        'agent_adapter.run_id': step.runId,
        'agent_adapter.flow': step.flow,
        'agent_adapter.superstep': step.superstep,
        'agent_adapter.node': scope.node,
        'agent_adapter.tool': tool,
      }),
      (span) => promised(() => this.run(scope, tool, args, span)),
      (error) => !(error instanceof RunPaused || error instanceof RunSleeping),
    );
    step.inflight.add(call);
    const settled = () => void step.inflight.delete(call);
    void call.then(settled, settled);
    return call;
  }

  /** The call's value, a promise of it, or a throw: `call` makes it one promise (`promised`). */
  private run(
    scope: NodeScope,
    tool: string,
    args: unknown,
    span?: SpanLike,
  ): unknown {
    const step = scope.step;
    const definition = this.registry.get(tool);
    if (!definition) {
      throw new FlowError(
        Messages.unregisteredTool(scope.node, tool),
        step.runId,
      );
    }
    const identity: CallIdentity = {
      node: scope.node,
      index: scope.nextIndex++,
      tool,
    };
    // Refused before anything is logged: the same arguments are refused again after a recovery.
    definition.checkArgs?.(args);
    // Encoded once: the hash, the records and every copy handed out come from this text.
    const argsText = canonical(args ?? null, `${tool}(args)`);
    const argsHash = hash('sha256', argsText.text, 'base64url');

    span?.setAttribute('agent_adapter.call_index', identity.index);
    const prior = step.replay?.lookup(identity);
    if (prior?.kind === 'done' && prior.argsHash === argsHash) {
      step.replayed.push(identity);
      span?.setAttribute('agent_adapter.replayed', true);
      return deliver(tool, step.runId, prior.outcome, true);
    }
    if (prior?.kind === 'done') step.unreplayed.push(identity);
    if (prior?.kind === 'inDoubt') {
      step.rerun.push(identity);
      span?.setAttribute('agent_adapter.rerun', true);
    }

    if (step.log.failure !== undefined) throw step.log.failure;
    const base: Base = { ...identity, argsHash };
    const fresh =
      !prior || (prior.kind !== 'inDoubt' && prior.argsHash !== argsHash);
    // A planned failover's mark only records the operator's acceptance: nothing was lost.
    const held = step.restored && !step.restored.failover?.planned;
    if (held && fresh && !definition.idempotent)
      return this.holdRestored(step, base, argsText);
    const approval = needsApproval(definition, scope, identity, argsText);
    const decision = approval
      ? step.decisions?.find(
          (d) =>
            d.node === identity.node &&
            d.index === identity.index &&
            d.tool === tool &&
            d.argsHash === argsHash,
        )
      : undefined;
    // A superstep that is pausing for an approval, or going to sleep, starts nothing more, except
    // a call whose decision is already sealed (it must be spent now, or it would be asked again).
    if (step.paused && !decision) throw new RunPaused(step.runId, tool);
    if (step.sleeping !== undefined && !decision)
      throw new RunSleeping(step.runId, scope.node, step.sleeping);
    if (approval && !decision && step.approvals) {
      return this.approveNow(
        step.approvals,
        definition,
        scope,
        identity,
        base,
        argsText,
      );
    }
    if (approval && !decision) {
      // Nothing ran: the call is logged `pending` (with the checkpoint that pauses the run). A
      // decision covers one call with these exact arguments; changed arguments ask again.
      const args = argsText.value();
      step.log.finished(step.superstep, {
        ...base,
        phase: 'pending',
        args,
        reason: 'awaiting approval',
        at: Date.now(),
      });
      const deadline = definition.approvalDeadline;
      step.paused ??= {
        ...identity,
        args,
        argsHash,
        // Sealed in the pausing checkpoint: the clock decides at this time, on any worker.
        ...(deadline && {
          deadline: Date.now() + deadline.timeoutMs,
          onTimeout: deadline.onTimeout,
        }),
      };
      throw new RunPaused(step.runId, tool);
    }
    if (decision && !decision.approved) {
      // Denied: recorded as the call's outcome, so a recovery gives the node the same answer.
      const denied = deniedOutcome(tool, decision);
      step.log.finished(step.superstep, {
        ...base,
        phase: 'done',
        outcome: denied,
        at: Date.now(),
      });
      return deliver(tool, step.runId, denied, false);
    }
    return this.execute(definition, scope, identity, base, argsText);
  }

  /**
   * A run restored from a backup meets a call of a tool that is not idempotent with no record of
   * it: it may have run after the backup was taken. It is not run. It is logged `restored` and the
   * segment stops (it writes nothing more, whatever the node does with the error), so recovery
   * names it among the calls in doubt, for an operator to resolve or rerun.
   */
  private async holdRestored(
    step: NodeScope['step'],
    base: Base,
    argsText: CanonicalText,
  ): Promise<never> {
    const why = Messages.restoredCall();
    await step.log.started(step.superstep, {
      ...base,
      phase: 'restored',
      args: argsText,
      reason: why,
      at: Date.now(),
    });
    const stop = new RecoveryNeedsDecision(step.runId, [[base.tool, why]]);
    step.log.stop(stop);
    throw stop;
  }

  /**
   * Asks a synchronous approval port. `approving` is stored before the port is asked (a crash
   * while it decides leaves the call in doubt); the decision is logged before the tool runs: in
   * the `started` record of an approved call, in the `done` record of a denied one.
   */
  private async approveNow(
    port: ApprovalPort,
    definition: ToolDefinition,
    scope: NodeScope,
    identity: CallIdentity,
    base: Base,
    argsText: CanonicalText,
  ): Promise<unknown> {
    const step = scope.step;
    const tool = definition.name;
    await step.log.started(step.superstep, {
      ...base,
      phase: 'approving',
      args: argsText,
      at: Date.now(),
    });
    let decision: SyncDecision;
    let runArgs = argsText;
    try {
      const request = {
        runId: step.runId,
        flow: step.flow,
        node: identity.node,
        index: identity.index,
        tool,
        args: argsText.value(),
        identity: { ...step.identity },
        requestId: deriveIdempotencyKey(
          step.ring,
          step.idemKid,
          step.runId,
          step.incarnation,
          step.superstep,
          identity,
          'agent-adapter approval request',
        ),
      };
      // Outside the node's scope, like a tool: a decorated tool the port calls stays plain.
      const verdict = checkVerdict(
        tool,
        await outsideCalls(() => port.decide(request)),
      );
      if (verdict.approved && verdict.args !== undefined) {
        runArgs = canonical(verdict.args, `${tool}(approved args)`);
      }
      decision = {
        approved: verdict.approved,
        ...(verdict.by !== undefined && { by: verdict.by }),
        ...(verdict.reason !== undefined && { reason: verdict.reason }),
        ...(runArgs.text !== argsText.text && { edited: true }),
      };
    } catch (error) {
      // The port failed: the tool did not run. Sealed as the call's outcome, like a tool's error.
      const e = asError(error);
      const failed: CallOutcome = {
        ok: false,
        error: {
          name: e.name,
          message: `the approval port failed for "${tool}": ${e.message}`,
        },
      };
      step.log.finished(step.superstep, {
        ...base,
        phase: 'done',
        outcome: failed,
        at: Date.now(),
      });
      return deliver(tool, step.runId, failed, false, error);
    }
    if (!decision.approved) {
      const denied = deniedOutcome(tool, decision);
      step.log.finished(step.superstep, {
        ...base,
        phase: 'done',
        outcome: denied,
        decision,
        at: Date.now(),
      });
      return deliver(tool, step.runId, denied, false);
    }
    return this.execute(definition, scope, identity, base, runArgs, decision);
  }

  /**
   * Runs the tool: each attempt logged `started` (stored before it runs), the final outcome
   * logged once. An attempt that threw (or, for an idempotent tool, timed out) is tried again
   * while the tool's retry policy allows; the next `started` carries the error it threw.
   */
  private async execute(
    definition: ToolDefinition,
    scope: NodeScope,
    identity: CallIdentity,
    base: Base,
    argsText: CanonicalText,
    decision?: SyncDecision,
  ): Promise<unknown> {
    const step = scope.step;
    const tries = definition.retry?.attempts ?? 1;
    let previous: { name: string; message: string } | undefined;
    for (let attempt = 1; ; attempt++) {
      await step.log.started(step.superstep, {
        ...base,
        phase: 'started',
        args: argsText,
        ...(decision && attempt === 1 && { decision }),
        ...(previous && { attempt, previous }),
        at: Date.now(),
      });
      let outcome = await invokeTool(definition, scope, identity, argsText);
      if (
        !outcome.sealed.ok &&
        outcome.unrecordable === undefined &&
        attempt < tries
      ) {
        const wait = backoff(definition, attempt, outcome.sealed.error);
        if (typeof wait === 'number') {
          previous = outcome.sealed.error;
          if (wait > 0) await sleep(wait);
          continue;
        }
        outcome = { sealed: wait, cause: outcome.cause };
      }
      step.log.finished(step.superstep, record(base, outcome, attempt));
      return deliver(
        definition.name,
        step.runId,
        outcome.sealed,
        false,
        outcome.cause,
        outcome.value,
      );
    }
  }
}
