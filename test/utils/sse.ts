/**
 * A server-sent-events client over fetch, as a browser's EventSource reads: `id:` and `data:`
 * lines, an event per blank line. It stops at the end of the response, when the connection breaks
 * (the server died), or after `max` events (the client leaves: the connection is aborted).
 */
export interface SseEvent {
  id?: string;
  data: string;
}

export interface SseRead {
  status: number;
  events: SseEvent[];
  /** Why the read stopped: the server ended the stream, the client left, or the connection broke. */
  end: 'ended' | 'left' | 'broken';
}

export async function readSse(
  url: string,
  options: { lastEventId?: string; max?: number } = {},
): Promise<SseRead> {
  const abort = new AbortController();
  const response = await fetch(url, {
    headers: {
      accept: 'text/event-stream',
      ...(options.lastEventId !== undefined && {
        'last-event-id': options.lastEventId,
      }),
    },
    signal: abort.signal,
  });
  const events: SseEvent[] = [];
  if (!response.body) return { status: response.status, events, end: 'ended' };
  const decoder = new TextDecoder();
  let buffer = '';
  let current: Partial<SseEvent> & { data?: string } = {};
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { status: response.status, events, end: 'ended' };
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline).replace(/\r$/, '');
        buffer = buffer.slice(newline + 1);
        if (line === '') {
          if (current.data !== undefined) {
            events.push({
              ...(current.id !== undefined && { id: current.id }),
              data: current.data,
            });
            if (options.max !== undefined && events.length >= options.max) {
              abort.abort();
              return { status: response.status, events, end: 'left' };
            }
          }
          current = {};
        } else if (line.startsWith('id:')) current.id = line.slice(3).trim();
        else if (line.startsWith('data:')) {
          const data = line.slice(5).replace(/^ /, '');
          current.data =
            current.data === undefined ? data : `${current.data}\n${data}`;
        }
      }
    }
  } catch {
    return { status: response.status, events, end: 'broken' };
  }
}
