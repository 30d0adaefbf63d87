/**
 * A TCP proxy in front of a real server (Postgres, Redis) that can lose one reply: armed with a
 * marker, it forwards the first request carrying that marker, lets the server execute (and commit)
 * it, then drops the server's reply and resets the client's connection. The client sees a dropped
 * connection for a write that landed: the "reply lost" fault, for real, with no driver mocked.
 */
import {
  createConnection,
  createServer,
  type Server,
  type Socket,
} from 'node:net';

export class CutProxy {
  /** Replies dropped so far. */
  cuts = 0;
  private marker: string | undefined;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => this.pipe(client));
  }

  static async start(target: {
    host: string;
    port: number;
  }): Promise<CutProxy & { port: number }> {
    const proxy = new CutProxy(target);
    await new Promise<void>((resolve) =>
      proxy.server.listen(0, '127.0.0.1', resolve),
    );
    const { port } = proxy.server.address() as { port: number };
    return Object.assign(proxy, { port });
  }

  /** The next request whose bytes contain `marker` runs, and its reply is lost. */
  arm(marker: string): void {
    this.marker = marker;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pipe(client: Socket): void {
    const upstream = createConnection(this.target);
    this.sockets.add(client).add(upstream);
    let victim = false;
    // The last bytes seen, so a marker split across two chunks is still found.
    let tail = '';
    client.on('data', (chunk: Buffer) => {
      const text = tail + chunk.toString('latin1');
      tail = text.slice(-256);
      if (this.marker !== undefined && text.includes(this.marker)) {
        this.marker = undefined;
        victim = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!victim) {
        client.write(chunk);
        return;
      }
      // The server answered (so it executed and committed): the answer never arrives.
      this.cuts++;
      client.resetAndDestroy();
      upstream.destroy();
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  }
}
