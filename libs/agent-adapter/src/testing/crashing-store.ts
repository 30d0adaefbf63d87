import type {
  CheckpointRecord,
  CheckpointStore,
} from '../exec/checkpoints/checkpoint-store';
import { Messages } from '../errors/messages';
import {
  InterceptingStore,
  type StoreWrite,
  type WriteHooks,
} from './intercepting-store';
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
export class CrashingStore extends InterceptingStore {
  dead = false;

  constructor(inner: CheckpointStore, crashAt: CrashPredicate = () => false) {
    // The hooks are bound once `this` exists; the intercepting store holds them by reference.
    const hooks: WriteHooks = {};
    super(inner, hooks);
    const crashIf = (write: StoreWrite, moment: 'before' | 'after') => {
      if (crashAt(crashWrite(write), moment))
        this.kill(`${moment} ${write.kind}`);
    };
    hooks.before = (write) => {
      this.alive();
      crashIf(write, 'before');
    };
    hooks.after = (write) => crashIf(write, 'after');
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

  /** Every read (and every write, again) fails once the worker is dead. */
  protected override async pass<T>(call: () => Promise<T>): Promise<T> {
    this.alive();
    return call();
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

/** A write as the crash predicate sees it: the call records' phases decoded. */
function crashWrite(write: StoreWrite): CrashWrite {
  const calls = write.records.map(decodeCall);
  return write.kind === 'save'
    ? { kind: 'save', checkpoint: write.checkpoint, calls }
    : { kind: 'recordCall', calls };
}
