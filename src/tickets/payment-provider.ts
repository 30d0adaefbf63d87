import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fsyncSync,
  openSync,
  readFileSync,
  readdirSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import { EXAMPLE_CONFIG, type ExampleConfig } from '../config';

/** One charge as the provider keeps it. */
export interface Charge {
  /** The provider's id for it: what `charge_card` returns. */
  id: string;
  /** The idempotency key it was made with: what an operator searches by. */
  key: string;
  amount: string;
  description: string;
  at: string;
}

const KEY = /^[A-Za-z0-9_-]{1,200}$/;

/**
 * A payment provider that honours idempotency keys as real ones do (Stripe's `Idempotency-Key`,
 * for one): a charge with a key it has seen returns that first charge and charges nothing. Its
 * ledger is one file per key, `payments/<key>.json` in the data folder, created atomically and
 * fsync'd: `find(key)` (or `cat` on that file) is the operator's search by idempotency key.
 */
@Injectable()
export class PaymentProvider {
  readonly dir: string;

  constructor(@Inject(EXAMPLE_CONFIG) config: ExampleConfig) {
    this.dir = join(config.dataDir, 'payments');
  }

  /** Charges once per key: `created` is false when the key's first charge is returned. */
  charge(
    key: string,
    amount: string,
    description: string,
  ): { charge: Charge; created: boolean } {
    if (!KEY.test(key)) throw new Error(`not an idempotency key: ${key}`);
    const charge: Charge = {
      id: `ch_${randomBytes(8).toString('hex')}`,
      key,
      amount,
      description,
      at: new Date().toISOString(),
    };
    let fd: number;
    try {
      // 'wx' creates the file or fails if it exists: the provider's duplicate check, atomically.
      fd = openSync(join(this.dir, `${key}.json`), 'wx');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      return { charge: this.find(key)!, created: false };
    }
    try {
      writeSync(fd, `${JSON.stringify(charge)}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    return { charge, created: true };
  }

  /** The charge made with this idempotency key, if any. */
  find(key: string): Charge | undefined {
    if (!KEY.test(key)) return undefined;
    try {
      return JSON.parse(
        readFileSync(join(this.dir, `${key}.json`), 'utf8'),
      ) as Charge;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  /** Every charge, oldest first. */
  all(): Charge[] {
    return readdirSync(this.dir)
      .filter((f) => f.endsWith('.json'))
      .map((f) => this.find(f.slice(0, -'.json'.length))!)
      .sort((a, b) => a.at.localeCompare(b.at));
  }
}
