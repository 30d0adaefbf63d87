import { CheckpointConflict, CheckpointStoreUnavailable } from '../../errors';
import { Messages } from '../../errors/messages';
import type { CheckpointStore } from '../checkpoints/checkpoint-store';
import { transientReason } from '../checkpoints/transient-errors';
import { promised } from '../promised';

/** How long a writer keeps at a store that fails transiently: `attempts` failed operations at most. */
export interface StoreRetry {
  attempts: number;
  /** The first pause; each next one doubles. */
  firstDelayMs: number;
}

/** About 3 s in all: long enough for a connection to be replaced or a failover, short of a lease. */
export const STORE_RETRY: StoreRetry = { attempts: 7, firstDelayMs: 50 };

/**
 * Writes with `write`; when the store fails in a way that may pass (`transientReason`), finds out
 * whether the write landed before writing again, by reading the head back. The head seal is unique
 * to one write (it seals the step and the call count that write leaves), so a head carrying
 * `sealedHead` is this write, committed with its reply lost: done, not a conflict. Any other head
 * means it did not land (or the run moved on): the write goes again and the store's
 * compare-and-set decides; a refused resend is read back once more, since the first attempt may
 * have committed after the read-back. When the store stays unavailable: `CheckpointStoreUnavailable`.
 */
export function writeConfirmed(
  store: CheckpointStore,
  runId: string,
  sealedHead: string,
  write: () => Promise<void>,
  landed: () => void,
  lost: (error: unknown) => void,
  retry: StoreRetry = STORE_RETRY,
): void {
  // Callbacks, not a promise of its own: this runs on every write, and the retry loop's async
  // function runs only after a failure (every write but a few succeeds at once).
  promised(write).then(landed, (error: unknown) =>
    confirmAfter(error, store, runId, sealedHead, write, retry).then(
      landed,
      lost,
    ),
  );
}

/** After the first attempt failed with `error`: reads back, waits and writes again. */
async function confirmAfter(
  error: unknown,
  store: CheckpointStore,
  runId: string,
  sealedHead: string,
  write: () => Promise<void>,
  retry: StoreRetry,
): Promise<void> {
  let budget = retry.attempts;
  let delay = retry.firstDelayMs;
  let why = '';
  const failed = (error: unknown): void => {
    const reason = transientReason(error);
    if (reason === undefined) throw error;
    why = reason;
    if (--budget <= 0) {
      throw new CheckpointStoreUnavailable(
        Messages.storeStayedUnavailable(runId, retry.attempts, why),
        runId,
        { cause: error, transient: true },
      );
    }
  };
  failed(error);
  for (;;) {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay *= 2;
      try {
        if (await landed(store, runId, sealedHead)) return;
        break; // it did not land: write again
      } catch (error) {
        failed(error);
      }
    }
    try {
      await write();
      return;
    } catch (error) {
      // A resend refused by the compare-and-set may have met this very write: the first attempt's
      // statement may still have been running when the connection dropped, and committed after
      // the read-back. Any other refusal stands.
      if (
        error instanceof CheckpointConflict &&
        (await landed(store, runId, sealedHead).catch(() => false))
      )
        return;
      failed(error);
    }
  }
}

/** Whether the run's head carries `sealedHead`: this write's seal, so the write is stored. */
async function landed(
  store: CheckpointStore,
  runId: string,
  sealedHead: string,
): Promise<boolean> {
  return (await store.head(runId))?.sealed === sealedHead;
}
