import type {
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  DueQuery,
  HeadlessPage,
  HeadlessQuery,
  HistoryPage,
  ListQuery,
  ListUnfinishedOptions,
  RunHead,
  RunPage,
  SaveOptions,
} from '../exec/checkpoints/checkpoint-store';
import { Messages } from '../errors/messages';
import { ForwardingStore } from './forwarding-store';
import { decodeCall, type DecodedCall } from './sealed-body';

/** What a worker "dies" with in-process: every later store operation of that worker fails. */
export class SimulatedCrash extends Error {
  /** `where` it died (none: it had died already and tried the store again). */
  constructor(where?: string) {
    super(Messages.simulatedCrash(where));
    this.name = 'SimulatedCrash';
  }
}

/** A store write as the crash predicate sees it, with the call records' phases decoded. */
export type CrashWrite =
  | { kind: 'save'; checkpoint: CheckpointRecord; calls: DecodedCall[] }
  | { kind: 'recordCall'; calls: DecodedCall[] };

export type CrashPredicate = (
  write: CrashWrite,
  moment: 'before' | 'after',
) => boolean;

/**
 * One worker's view of a shared store that can die at a chosen write, before or after it reaches
 * the store. A dead worker can neither read nor write, like a killed process; closing it kills it
 * and leaves the shared store open for the other workers.
 */
export class CrashingStore extends ForwardingStore {
  dead = false;

  constructor(
    inner: CheckpointStore,
    private readonly crashAt: CrashPredicate = () => false,
  ) {
    super(inner);
  }

  // One process's private view: the runner does not ask it for a key of its own.
  override get shared(): boolean {
    return false;
  }

  /** For a tool to die inside its body. */
  kill(where = 'inside a tool'): never {
    this.dead = true;
    throw new SimulatedCrash(where);
  }

  private alive(): void {
    if (this.dead) throw new SimulatedCrash();
  }

  private async write(
    w: CrashWrite,
    apply: () => Promise<void>,
  ): Promise<void> {
    this.alive();
    if (this.crashAt(w, 'before')) this.kill(`before ${w.kind}`);
    await apply();
    if (this.crashAt(w, 'after')) this.kill(`after ${w.kind}`);
  }

  override save(
    checkpoint: CheckpointRecord,
    options?: SaveOptions,
  ): Promise<void> {
    const calls = (options?.calls ?? []).map(decodeCall);
    return this.write({ kind: 'save', checkpoint, calls }, () =>
      super.save(checkpoint, options),
    );
  }

  override recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
    head?: string,
  ): Promise<void> {
    const calls = records.map(decodeCall);
    return this.write({ kind: 'recordCall', calls }, () =>
      super.recordCall(runId, segment, records, head),
    );
  }

  override async latest(runId: string): Promise<CheckpointRecord | undefined> {
    this.alive();
    return super.latest(runId);
  }
  override async head(runId: string): Promise<RunHead | undefined> {
    this.alive();
    return super.head(runId);
  }
  override async listUnfinished(
    flow: string,
    options?: ListUnfinishedOptions,
  ): Promise<RunHead[]> {
    this.alive();
    return super.listUnfinished(flow, options);
  }
  override async listDue(query: DueQuery): Promise<RunHead[]> {
    this.alive();
    return super.listDue(query);
  }
  override async delete(runId: string): Promise<boolean> {
    this.alive();
    return super.delete(runId);
  }
  override async calls(
    runId: string,
    superstep: number,
  ): Promise<CallRecord[]> {
    this.alive();
    return super.calls(runId, superstep);
  }
  override async list(query?: ListQuery): Promise<RunPage> {
    this.alive();
    return super.list(query);
  }
  override async listHeadless(query?: HeadlessQuery): Promise<HeadlessPage> {
    this.alive();
    return super.listHeadless(query);
  }
  override async history(runId: string): Promise<HistoryPage> {
    this.alive();
    return super.history(runId);
  }
  override async renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ): Promise<number> {
    this.alive();
    return super.renewLeases(owner, leaseExpiresAt, runIds);
  }
  // The inner store is shared with the other workers: it stays open.
  override close(): Promise<void> {
    this.dead = true;
    return Promise.resolve();
  }
}

/** Lets pending timers (buffered call-log flushes) of a dead worker run out. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}
