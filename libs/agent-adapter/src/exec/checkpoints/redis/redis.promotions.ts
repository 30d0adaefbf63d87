/**
 * The tenant's promotion log (why: redis.failover.ts). Apart from the scripts: it talks to every
 * master, and the scripts' module must not import the client.
 */
import { masters, type RedisClient } from './redis.client';
import type { RedisKeys } from './redis.layout';

/** Between two looks at the masters' promotions: a second (a look is O(masters) INFO calls). */
const LOOK_MS = 1_000;

/**
 * The tenant's promotion log, `{P}:promoted` (see the file's comment): what each master was
 * promoted from, recorded while its INFO still shows it.
 */
export class PromotionLog {
  #lookedAt = -Infinity;

  constructor(
    private readonly client: RedisClient,
    private readonly keys: RedisKeys,
  ) {}

  /**
   * Records the promotions the masters show now; at most once a second. A master that does not
   * answer (down in a failover) is looked at again next time: the log is evidence, not a gate.
   */
  async look(): Promise<void> {
    const now = Date.now();
    if (now - this.#lookedAt < LOOK_MS) return;
    this.#lookedAt = now;
    const infos = await Promise.allSettled(
      masters(this.client).map((node) => node.info('replication')),
    );
    const found: string[] = [];
    for (const info of infos) {
      if (info.status !== 'fulfilled') continue;
      const to = /master_replid:(\w+)/.exec(info.value)?.[1];
      const from = /master_replid2:(\w+)/.exec(info.value)?.[1];
      if (to && from && !/^0+$/.test(from)) found.push(from, to);
    }
    await this.record(...found);
  }

  /** Records promotions: pairs of the id promoted from and the id promoted to. */
  async record(...pairs: string[]): Promise<void> {
    if (pairs.length === 0) return;
    await Promise.all(
      pairs
        .filter((_, i) => i % 2 === 0)
        .map((from, i) =>
          this.client.hsetnx(this.keys.promoted, from, pairs[2 * i + 1]!),
        ),
    );
  }

  /** The mode's verdict on an id a script could not place: `-id` if promoted from, else `+id`. */
  async verdict(id: string): Promise<string> {
    const promoted = await this.client.hexists(this.keys.promoted, id);
    return (promoted ? '-' : '+') + id;
  }
}
