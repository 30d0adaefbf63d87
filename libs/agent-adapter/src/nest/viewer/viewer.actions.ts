import { BadRequestException, Injectable, Logger } from '@nestjs/common';
import { CheckpointNotFound, FlowError } from '../../errors';
import {
  CheckpointStore,
  type RunStatus,
} from '../../exec/checkpoints/checkpoint-store';
import type { ResumeDecision } from '../../flow/flow.interfaces';
import type { CallFinding } from '../../flow/runner/resolve';
import { DurableFlowRunner } from '../durable-flow.runner';
import { NestMessages } from '../durable.messages';
import { FlowRegistry } from '../flow.registry';
import { ToolLoopRunner } from '../tool-loop.runner';

/** Who decided and why, as the viewer's operator gave them. @internal */
export interface ViewerDecided {
  by?: string;
  reason?: string;
}

/**
 * What the run viewer's buttons do: each action goes through the module's runner (the flow's, or
 * the tool loop's when the run is one), so it gets the runner's checks and compare-and-set, and is
 * logged with who decided.
 * @internal
 */
@Injectable()
export class ViewerActions {
  private readonly logger = new Logger('DurableViewer');

  constructor(
    private readonly runner: DurableFlowRunner,
    private readonly loops: ToolLoopRunner,
    private readonly store: CheckpointStore,
    private readonly flows: FlowRegistry,
  ) {}

  /** Approves or denies the call a paused run waits for. */
  async decide(
    runId: string,
    decision: ResumeDecision,
  ): Promise<{ status: RunStatus }> {
    const name = await this.flowOf(runId);
    this.logger.log(
      `Run "${runId}": ${decision.approved ? 'approved' : 'denied'} in the viewer by ${decision.by ?? 'unnamed'}.`,
    );
    const loop = this.loops.get(name);
    const r = loop
      ? await loop.run([], { runId, decision })
      : await this.runner.resume(name, runId, decision);
    return { status: r.status };
  }

  /**
   * Recovers a run, running its calls in doubt again (after an operator checked them); a flow's
   * claim seals who decided and why.
   */
  async rerunInDoubt(
    runId: string,
    decided: ViewerDecided = {},
  ): Promise<{ status: RunStatus }> {
    const name = await this.flowOf(runId);
    this.logger.log(
      `Run "${runId}": calls in doubt rerun from the viewer by ${decided.by ?? 'unnamed'}.`,
    );
    const loop = this.loops.get(name);
    const r = loop
      ? await loop.recover(runId, { rerunInDoubt: true })
      : await this.runner.recover(name, runId, {
          rerunInDoubt: true,
          ...decided,
        });
    return { status: r.status };
  }

  /**
   * Records what one call in doubt really did (it ran, with its result or error; or it did not),
   * then goes on: the runner's `resolve`. Its `TypeError` (a finding that is not well formed, or
   * names no call in doubt) is thrown before anything is stored: a 400 with its message.
   */
  async resolve(
    runId: string,
    finding: CallFinding,
    decided: ViewerDecided = {},
  ): Promise<{ status: RunStatus }> {
    const name = await this.flowOf(runId);
    const request = { calls: [finding], ...decided };
    this.logger.log(
      `Run "${runId}": call ${String(finding.call)} resolved as ${finding.ran ? 'ran' : 'did not run'} in the viewer by ${decided.by ?? 'unnamed'}.`,
    );
    const loop = this.loops.get(name);
    try {
      const r = loop
        ? await loop.resolve(runId, request)
        : await this.runner.resolve(name, runId, request);
      return { status: r.status };
    } catch (error) {
      if (error instanceof TypeError)
        throw new BadRequestException(error.message);
      throw error;
    }
  }

  private async flowOf(runId: string): Promise<string> {
    const head = await this.store.head(runId);
    if (!head) throw new CheckpointNotFound(runId);
    if (!this.loops.get(head.flow) && !this.flows.get(head.flow)) {
      throw new FlowError(
        NestMessages.viewerUnknownFlow(runId, head.flow),
        runId,
      );
    }
    return head.flow;
  }
}
