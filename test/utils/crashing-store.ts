import {
  CheckpointStore,
  type CallRecord,
  type CheckpointRecord,
  type ListQuery,
  type ListUnfinishedOptions,
  type SaveOptions,
} from 'agent-adapter';

/** What a worker "dies" with in-process: every later store operation of that worker fails. */
export class SimulatedCrash extends Error {
  constructor(where: string) {
    super(`simulated crash ${where}`);
    this.name = 'SimulatedCrash';
  }
}

/** A store write as the crash predicate sees it, with the call records' phases decoded. */
export type Write =
  | { kind: 'save'; checkpoint: CheckpointRecord; calls: DecodedCall[] }
  | { kind: 'recordCall'; calls: DecodedCall[] };

export interface DecodedCall {
  record: CallRecord;
  phase: string;
  tool: string;
  node: string;
}

export type CrashPredicate = (
  write: Write,
  moment: 'before' | 'after',
) => boolean;

/** Reads a sealed record's body without verifying it (test inspection only). */
export function bodyOf(sealed: string): Record<string, unknown> {
  return JSON.parse(sealed.split('.').slice(3).join('.')) as Record<
    string,
    unknown
  >;
}

export function decode(record: CallRecord): DecodedCall {
  const body = bodyOf(record.sealed);
  return {
    record,
    phase: String(body.phase),
    tool: String(body.tool),
    node: String(body.node),
  };
}

/**
 * One worker's view of a shared store that can die at a chosen write, before or after it reaches
 * the store. A dead worker can neither read nor write, like a killed process.
 */
export class CrashingStore extends CheckpointStore {
  readonly shared = false;
  dead = false;

  constructor(
    readonly inner: CheckpointStore,
    private readonly crashAt: CrashPredicate = () => false,
  ) {
    super();
  }

  /** For a tool to die inside its body. */
  kill(where = 'inside a tool'): never {
    this.dead = true;
    throw new SimulatedCrash(where);
  }

  private alive(): void {
    if (this.dead) throw new SimulatedCrash('(worker is dead)');
  }

  private async write(w: Write, apply: () => Promise<void>): Promise<void> {
    this.alive();
    if (this.crashAt(w, 'before')) this.kill(`before ${w.kind}`);
    await apply();
    if (this.crashAt(w, 'after')) this.kill(`after ${w.kind}`);
  }

  save(checkpoint: CheckpointRecord, options?: SaveOptions): Promise<void> {
    const calls = (options?.calls ?? []).map(decode);
    return this.write({ kind: 'save', checkpoint, calls }, () =>
      this.inner.save(checkpoint, options),
    );
  }

  recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
  ): Promise<void> {
    return this.write({ kind: 'recordCall', calls: records.map(decode) }, () =>
      this.inner.recordCall(runId, segment, records),
    );
  }

  async latest(runId: string) {
    this.alive();
    return this.inner.latest(runId);
  }
  async head(runId: string) {
    this.alive();
    return this.inner.head(runId);
  }
  async listUnfinished(flow: string, options?: ListUnfinishedOptions) {
    this.alive();
    return this.inner.listUnfinished(flow, options);
  }
  async delete(runId: string) {
    this.alive();
    return this.inner.delete(runId);
  }
  async calls(runId: string, superstep: number) {
    this.alive();
    return this.inner.calls(runId, superstep);
  }
  async list(query?: ListQuery) {
    this.alive();
    return this.inner.list(query);
  }
  async history(runId: string) {
    this.alive();
    return this.inner.history(runId);
  }
  async renewLeases(
    owner: string,
    leaseExpiresAt: number,
    runIds: readonly string[],
  ) {
    this.alive();
    return this.inner.renewLeases(owner, leaseExpiresAt, runIds);
  }
  async close() {
    this.dead = true;
  }
}

/** Lets pending timers (buffered call-log flushes) of a dead worker run out. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}
