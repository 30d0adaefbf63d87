/**
 * Rings for a run when this process stored entries of its stream, so a reader in the same process
 * reads them at once instead of at its next poll. Readers elsewhere poll (see `FlowRunner.stream`).
 */
export class StreamBell {
  private readonly waiting = new Map<string, Set<() => void>>();

  ring(runId: string): void {
    const wakers = this.waiting.get(runId);
    if (!wakers) return;
    this.waiting.delete(runId);
    for (const wake of wakers) wake();
  }

  /** Resolves when `ring(runId)` is called, after `ms`, or when `signal` aborts, whichever first. */
  wait(runId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      let wakers = this.waiting.get(runId);
      if (!wakers) this.waiting.set(runId, (wakers = new Set()));
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        wakers.delete(done);
        if (wakers.size === 0 && this.waiting.get(runId) === wakers)
          this.waiting.delete(runId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      wakers.add(done);
      if (signal?.aborted) done();
      else signal?.addEventListener('abort', done, { once: true });
    });
  }
}
