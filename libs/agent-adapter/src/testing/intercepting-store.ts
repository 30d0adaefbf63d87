import type {
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  SaveOptions,
} from '../exec/checkpoints/checkpoint-store';
import { ForwardingStore } from './forwarding-store';

/** One write the runner makes, as the store receives it. */
export type StoreWrite =
  | {
      kind: 'save';
      checkpoint: CheckpointRecord;
      options: SaveOptions | undefined;
      /** The call records saved with the checkpoint (`options.calls`). */
      records: CallRecord[];
    }
  | {
      kind: 'recordCall';
      runId: string;
      segment: number;
      records: CallRecord[];
    };

/**
 * What to do around each write. A hook may delay the write (return a promise), fail it (throw),
 * or only watch it; `after` runs once the inner store accepted the write.
 */
export interface WriteHooks {
  before?(write: StoreWrite): void | Promise<void>;
  after?(write: StoreWrite): void | Promise<void>;
}

/**
 * A store whose writes (`save`, `recordCall`) pass through hooks: fault injection at a chosen
 * write, write counters, a save held until a test lets it go. Reads pass straight through.
 */
export class InterceptingStore extends ForwardingStore {
  constructor(
    inner: CheckpointStore,
    private readonly hooks: WriteHooks,
  ) {
    super(inner);
  }

  override save(
    checkpoint: CheckpointRecord,
    options?: SaveOptions,
  ): Promise<void> {
    const write: StoreWrite = {
      kind: 'save',
      checkpoint,
      options,
      records: options?.calls ?? [],
    };
    return this.around(write, () => this.inner.save(checkpoint, options));
  }

  override recordCall(
    runId: string,
    segment: number,
    records: CallRecord[],
    head?: string,
  ): Promise<void> {
    const write: StoreWrite = { kind: 'recordCall', runId, segment, records };
    return this.around(write, () =>
      this.inner.recordCall(runId, segment, records, head),
    );
  }

  private async around(
    write: StoreWrite,
    apply: () => Promise<void>,
  ): Promise<void> {
    // Synchronous hooks are not awaited: a wrapped store keeps the inner store's timing.
    const before = this.hooks.before?.(write);
    if (before) await before;
    await apply();
    const after = this.hooks.after?.(write);
    if (after) await after;
  }
}
