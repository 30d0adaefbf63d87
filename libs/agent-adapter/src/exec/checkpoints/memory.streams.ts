import type { StreamQuery, StreamRecord } from './checkpoint-store';

/** One run's stream in memory: its entries in order, and how many were dropped before them. */
interface MemoryStream {
  entries: StreamRecord[];
  length: number;
}

/** The memory store's run streams (the fencing is the store's, before it calls `append`). */
export class MemoryStreams {
  private readonly streams = new Map<string, MemoryStream>();

  append(
    runId: string,
    entries: readonly Omit<StreamRecord, 'offset'>[],
    keep: number,
  ): number {
    let stream = this.streams.get(runId);
    if (!stream) this.streams.set(runId, (stream = { entries: [], length: 0 }));
    const first = stream.length;
    for (const e of entries)
      stream.entries.push({ ...e, runId, offset: stream.length++ });
    const current = Math.min(...entries.map((e) => e.superstep));
    const drop = stream.entries.length - keep;
    let dropped = 0;
    while (
      dropped < drop &&
      (stream.entries[dropped]?.superstep ?? current) < current
    )
      dropped++;
    stream.entries.splice(0, dropped);
    return first;
  }

  read(runId: string, query: StreamQuery = {}): StreamRecord[] {
    const { from = 0, superstep, limit = 100 } = query;
    const out: StreamRecord[] = [];
    for (const e of this.streams.get(runId)?.entries ?? []) {
      if (out.length >= limit) break;
      if (e.offset < from) continue;
      if (superstep !== undefined && e.superstep !== superstep) continue;
      out.push({ ...e });
    }
    return out;
  }

  delete(runId: string): void {
    this.streams.delete(runId);
  }
}
