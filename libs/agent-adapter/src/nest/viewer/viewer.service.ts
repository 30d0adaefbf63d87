import { Injectable } from '@nestjs/common';
import {
  inspectRun,
  type DoubtfulCall,
  type Inspection,
} from '../../cli/inspect';
import { corruptMessage } from '../../cli/corrupt-wording';
import { CheckpointNotFound } from '../../errors';
import {
  CheckpointStore,
  type CheckpointRecord,
  type RunHead,
  type RunStatus,
  type StoreFailover,
} from '../../exec/checkpoints/checkpoint-store';
import { canonicalJson, type Json } from '../../exec/durable/canonical-json';
import type { KeyRing } from '../../exec/durable/key-ring';
import { headProblem, readHeadless } from '../../flow/runner/run-reader';
import {
  openCall,
  openCheckpoint,
  type Call,
  type PendingApproval,
  type SealedError,
} from '../../exec/durable/records';
import { ToolRegistry } from '../../exec/tool.registry';
import type { RecordedDecision } from '../../flow/flow.interfaces';
import { DurableFlowRunner } from '../durable-flow.runner';
import { FlowRegistry } from '../flow.registry';
import { ToolLoopRunner } from '../tool-loop.runner';

/** A run whose checkpoints are stored without a head. */
export interface ViewerHeadless {
  runId: string;
  /** The flow its latest checkpoint names, when that checkpoint verifies. */
  flow?: string;
  corrupt: string;
}

/** One run in the list. */
export interface ViewerRunSummary {
  runId: string;
  flow: string;
  status: RunStatus;
  step: number;
  updatedAt: number;
  owner?: string;
  /** A recovery claimed the run at least once (after a worker was lost). */
  recovered: boolean;
  /** Its cut superstep has calls in doubt (an unfinished run that a recovery would have to decide on). */
  inDoubt: boolean;
  /**
   * Why the run's head does not verify (a column edited below the store, a deleted row...): its
   * status, step and flow above are the store's columns, not to be trusted.
   */
  corrupt?: string;
}

export interface ViewerCheckpoint {
  step: number;
  status: RunStatus;
  segment: number;
  superstep?: number;
  reason?: string;
  /** A recovery's claim (it opened a new segment after a worker was lost). */
  claim: boolean;
  /** State keys whose value differs from the previous checkpoint's. */
  changed?: Record<string, Json>;
  corrupt?: string;
}

export interface ViewerCall {
  superstep: number;
  node: string;
  index: number;
  tool: string;
  records: Array<{ phase: string; segment: number; seq: number; at: number }>;
  /** From its first `started` to its `done`, in one segment. */
  durationMs?: number;
  outcome?: Json | { error: SealedError };
  /** Finished before a recovery, whose rerun of the superstep replayed it. */
  replayed: boolean;
  /** Started in more than one segment: it ran again after a recovery. */
  rerun: boolean;
  /** Why it is in doubt now. */
  inDoubt?: string;
}

export interface ViewerRun extends ViewerRunSummary {
  segment: number;
  error?: SealedError;
  /** A paused run's call, with its approval deadline and `onTimeout` when it has one. */
  pending?: PendingApproval;
  /** A sleeping run: when it wakes (epoch ms), from its sealed checkpoint. */
  wakeAt?: number;
  checkpoints: ViewerCheckpoint[];
  calls: ViewerCall[];
  inDoubt: boolean;
  /**
   * The calls in doubt, with recovery's own reasons and what to check at each call's system: call
   * id, arguments, the idempotency key the tool got, when it started.
   */
  doubtful: DoubtfulCall[];
  /**
   * The head's due time (epoch ms): a running run's lease; a sleeping run's wake time and a paused
   * run's deadline are shown from the sealed `wakeAt` and `pending` instead.
   */
  leaseExpiresAt?: number;
  /** The owner's lease has not expired: that worker may be alive, mid-call. */
  leaseLive: boolean;
  /**
   * A Redis failover may have lost the run's last writes (`FailoverNeedsDecision`): a finding on
   * one call is refused until it is marked restored (`runs restored --failover`).
   */
  failover?: StoreFailover;
  /** Every decision recorded in the run (approve, deny, rerun in doubt, cancel), oldest first. */
  decisions: RecordedDecision[];
}

/**
 * What the run viewer shows and does, from the module's store and runners. Every row is opened
 * with the module's key (a row that does not verify is shown as corrupt, never trusted). What its
 * buttons do is in `ViewerActions`.
 * @internal
 */
@Injectable()
export class ViewerService {
  constructor(
    private readonly runner: DurableFlowRunner,
    private readonly loops: ToolLoopRunner,
    private readonly store: CheckpointStore,
    private readonly registry: ToolRegistry,
    private readonly flows: FlowRegistry,
  ) {}

  private get ring(): KeyRing {
    return this.runner.core.keyRing;
  }

  meta(): { flows: string[]; loops: string[] } {
    return {
      flows: this.flows.names(),
      loops: this.loops.all().map((l) => l.name),
    };
  }

  async list(query: {
    flow?: string;
    status?: RunStatus;
    before?: string;
    limit: number;
  }): Promise<{ runs: ViewerRunSummary[]; next?: string }> {
    const page = await this.store.list(query);
    const runs = await Promise.all(page.runs.map((head) => this.summary(head)));
    return { runs, ...(page.next !== undefined && { next: page.next }) };
  }

  /**
   * Runs whose checkpoints are stored without a head (deleted below the store), which no list of
   * heads shows; a page at a time, on the operator's request (it reads every run once).
   */
  async headless(
    cursor?: string,
  ): Promise<{ runs: ViewerHeadless[]; next?: string }> {
    const page = await this.store.listHeadless({
      limit: 20,
      ...(cursor !== undefined && { cursor }),
    });
    const runs: ViewerHeadless[] = [];
    for (const runId of page.runIds) {
      const found = await readHeadless(this.store, this.ring, runId);
      if (found)
        runs.push({
          runId,
          ...(found.flow !== undefined && { flow: found.flow }),
          corrupt: corruptMessage(found.problem),
        });
    }
    return { runs, ...(page.next !== undefined && { next: page.next }) };
  }

  async run(runId: string): Promise<ViewerRun> {
    const head = await this.store.head(runId);
    if (!head) {
      // No head: no run, or one whose head was deleted below the store (corrupt, never "no run").
      const found = await readHeadless(this.store, this.ring, runId);
      throw found?.problem ?? new CheckpointNotFound(runId);
    }
    const history = await this.store.history(runId);
    const inspection = await this.inspect(head.runId);
    const doubtful = head.status === 'running' ? inspection.inDoubt : [];

    let previous: Record<string, Json> | undefined;
    let lastSegment: number | undefined;
    let error: SealedError | undefined;
    let pending: PendingApproval | undefined;
    let wakeAt: number | undefined;
    // The run's incarnation, from its checkpoints: call records of an earlier run with this id are skipped.
    let incarnation: number | undefined;
    /** Supersteps a recovery ran again, by the segment that ran them. */
    const rerunIn = new Map<number, Set<number>>();
    const checkpoints = history.checkpoints.map((record): ViewerCheckpoint => {
      // A new segment: a recovery's claim, or a resume; either reruns the superstep (replaying).
      const reran = lastSegment !== undefined && record.segment !== lastSegment;
      lastSegment = record.segment;
      const row = {
        step: record.step,
        status: record.status,
        segment: record.segment,
        claim: false,
      };
      try {
        const cp = openCheckpoint(this.ring, record);
        incarnation = cp.incarnation;
        const state = cp.state as Record<string, Json>;
        const changed = diff(previous, state);
        previous = state;
        error = cp.error;
        pending = cp.pending;
        wakeAt = cp.wakeAt;
        if (reran) {
          const set = rerunIn.get(cp.superstep) ?? new Set<number>();
          rerunIn.set(cp.superstep, set.add(record.segment));
        }
        return {
          ...row,
          claim: cp.reason === 'claim',
          superstep: cp.superstep,
          ...(cp.reason !== undefined && { reason: cp.reason }),
          ...(Object.keys(changed).length > 0 && { changed }),
        };
      } catch (e) {
        return { ...row, corrupt: (e as Error).message };
      }
    });

    const byCall = new Map<string, { first: Call; records: Call[] }>();
    for (const record of history.calls) {
      let call: Call;
      try {
        call = openCall(this.ring, record, incarnation);
      } catch {
        continue; // shown as corrupt by `runs verify`; the viewer lists what verifies
      }
      const key = `${call.superstep}/${call.node}/${call.index}/${call.tool}`;
      const entry = byCall.get(key) ?? { first: call, records: [] };
      entry.records.push(call);
      byCall.set(key, entry);
    }
    const calls = [...byCall.values()].map(({ first, records }): ViewerCall => {
      const segments = new Set(
        records.filter((r) => r.phase === 'started').map((r) => r.segment),
      );
      const done = records.find((r) => r.phase === 'done');
      const started =
        done &&
        records.find(
          (r) => r.phase === 'started' && r.segment === done.segment,
        );
      const laterRuns = [...(rerunIn.get(first.superstep) ?? [])].filter(
        (s) => done !== undefined && s !== done.segment,
      );
      const why = doubtful.find(
        (d) =>
          d.node === first.node &&
          d.index === first.index &&
          d.tool === first.tool,
      );
      return {
        superstep: first.superstep,
        node: first.node,
        index: first.index,
        tool: first.tool,
        records: records.map((r) => ({
          phase: r.phase,
          segment: r.segment,
          seq: r.seq,
          at: r.at,
        })),
        ...(started && done && { durationMs: done.at - started.at }),
        ...(done?.outcome && {
          outcome: done.outcome.ok
            ? (done.outcome.value ?? null)
            : { error: done.outcome.error },
        }),
        replayed:
          laterRuns.length > 0 && !laterRuns.some((s) => segments.has(s)),
        rerun: segments.size > 1,
        ...(why && { inDoubt: why.why }),
      };
    });

    return {
      ...(await this.summary(
        head,
        this.wasRecovered(history.checkpoints),
        doubtful.length > 0,
      )),
      segment: head.segment,
      ...(head.leaseExpiresAt !== undefined && {
        leaseExpiresAt: head.leaseExpiresAt,
      }),
      leaseLive: inspection.leaseLive,
      ...(inspection.failover && { failover: inspection.failover }),
      decisions: inspection.decisions,
      ...(error && { error }),
      ...(pending && head.status === 'paused' && { pending }),
      ...(wakeAt !== undefined && head.status === 'sleeping' && { wakeAt }),
      checkpoints,
      calls,
      doubtful,
    };
  }

  private async summary(
    head: RunHead,
    recovered?: boolean,
    inDoubt?: boolean,
  ): Promise<ViewerRunSummary> {
    const problem = headProblem(this.ring, head);
    const corrupt = problem && corruptMessage(problem);
    return {
      runId: head.runId,
      flow: head.flow,
      status: head.status,
      step: head.step,
      updatedAt: head.updatedAt,
      ...(head.owner !== undefined && { owner: head.owner }),
      recovered:
        recovered ??
        this.wasRecovered((await this.store.history(head.runId)).checkpoints),
      inDoubt:
        corrupt === undefined &&
        (inDoubt ?? (await this.doubtful(head)).length > 0),
      ...(corrupt !== undefined && { corrupt }),
    };
  }

  /**
   * A recovery claimed the run at some point after a worker was lost (a checkpoint saved with
   * reason "claim"). A resume after a decision also opens a segment, but is not a recovery. The
   * one rule for the list and the run page.
   */
  private wasRecovered(checkpoints: readonly CheckpointRecord[]): boolean {
    return checkpoints.some((record) => {
      try {
        return openCheckpoint(this.ring, record).reason === 'claim';
      } catch {
        return false;
      }
    });
  }

  /** Recovery's own dry run (no write): the calls of the cut superstep that are in doubt. */
  private async doubtful(head: RunHead): Promise<DoubtfulCall[]> {
    if (head.status !== 'running') return [];
    return (await this.inspect(head.runId)).inDoubt;
  }

  /** `runs inspect` with this application's registry: which tools are idempotent is known. */
  private inspect(runId: string): Promise<Inspection> {
    const tools = this.registry.list();
    return inspectRun(this.store, this.ring, runId, {
      idempotent: tools.filter((t) => t.idempotent).map((t) => t.name),
      notIdempotent: tools.filter((t) => !t.idempotent).map((t) => t.name),
    });
  }
}

/** Top-level keys of `next` whose value is not the same as in `prev`. */
function diff(
  prev: Record<string, Json> | undefined,
  next: Record<string, Json>,
): Record<string, Json> {
  const changed: Record<string, Json> = {};
  for (const [key, value] of Object.entries(next ?? {})) {
    if (
      !prev ||
      !(key in prev) ||
      canonicalJson(prev[key]) !== canonicalJson(value)
    )
      changed[key] = value;
  }
  return changed;
}
