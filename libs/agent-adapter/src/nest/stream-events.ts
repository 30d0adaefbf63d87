import { BadRequestException, type MessageEvent } from '@nestjs/common';
import { Observable } from 'rxjs';
import type { StreamEntry } from '../exec/durable/stream-entries';
import { NestMessages } from './durable.messages';

/**
 * A run's stream as server-sent events, for a controller's `@Sse()` route: each entry one event,
 * its id the entry's offset (an `EventSource` that reconnects sends the last one back as
 * `Last-Event-ID`: `streamOffset` turns it into where to read on), its data the entry. `read` is
 * given a signal that aborts when the client goes away. An error before the first event (an
 * unknown run, a stranger's ctx) reaches the exception filters, which can still answer it.
 *
 * ```ts
 * @Sse(':id/stream')
 * stream(@Param('id') id: string, @Headers('last-event-id') last?: string, @Query('from') from?: string) {
 *   return streamEvents((signal) =>
 *     this.runner.stream(OrderFlow, id, { from: streamOffset(last, from), signal }));
 * }
 * ```
 * @publicApi
 */
export function streamEvents(
  read: (signal: AbortSignal) => AsyncIterable<StreamEntry>,
): Observable<MessageEvent> {
  return new Observable<MessageEvent>((subscriber) => {
    const abort = new AbortController();
    void (async () => {
      try {
        for await (const entry of read(abort.signal)) {
          if (subscriber.closed) return;
          subscriber.next({ id: String(entry.offset), data: entry });
        }
        subscriber.complete();
      } catch (error) {
        subscriber.error(error);
      }
    })();
    return () => abort.abort();
  });
}

/**
 * Where a (re)connecting client reads from: the entry after its `Last-Event-ID`, else `from` (a
 * query parameter), else 0. A value that is not an offset is a 400 naming it.
 * @publicApi
 */
export function streamOffset(lastEventId?: string, from?: string): number {
  const offset = (text: string) => {
    if (!/^\d{1,15}$/.test(text.trim()))
      throw new BadRequestException(NestMessages.streamOffset(text));
    return Number(text.trim());
  };
  if (lastEventId !== undefined && lastEventId !== '')
    return offset(lastEventId) + 1;
  if (from !== undefined && from !== '') return offset(from);
  return 0;
}
