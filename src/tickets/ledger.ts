import {
  appendFileSync,
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { idempotencyKey } from 'agent-adapter';
import { EXAMPLE_CONFIG, type ExampleConfig } from '../config';

/**
 * What the tools really did, outside the library's store: one line per side effect in
 * `ledger.log`, written and fsync'd before the tool returns, so it survives a SIGKILL. This is how
 * you (and the tests) see that a recovered run charged the card once.
 */
@Injectable()
export class Ledger {
  private readonly logger = new Logger('Ledger');
  readonly file: string;

  constructor(@Inject(EXAMPLE_CONFIG) private readonly config: ExampleConfig) {
    this.file = join(config.dataDir, 'ledger.log');
  }

  /**
   * Waits like a slow API would, then acts (`what` does the side effect and says what it did, or is
   * that text) and records it.
   */
  async act(tool: string, what: string | (() => string)): Promise<void> {
    if (this.config.toolDelayMs) await sleep(this.config.toolDelayMs);
    while (this.config.toolGate && !existsSync(this.config.toolGate))
      await sleep(50);
    if (this.config.crashBefore === tool) {
      this.logger.warn(
        `CRASH_BEFORE=${tool}: the process dies now, inside ${tool}, before it acted.`,
      );
      process.kill(process.pid, 'SIGKILL');
    }
    const did = typeof what === 'string' ? what : what();
    const line = `${new Date().toISOString()} worker=${this.config.workerId} pid=${process.pid} ${tool}: ${did} (key ${keyPrefix()})\n`;
    const fd = openSync(this.file, 'a');
    try {
      writeSync(fd, line);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (this.config.crashIn === tool) {
      this.logger.warn(
        `CRASH_IN=${tool}: the process dies now, inside ${tool}, after it acted.`,
      );
      process.kill(process.pid, 'SIGKILL');
    }
  }
}

/** A mail provider that sends one message per idempotency key (as Postmark or SES do). */
@Injectable()
export class Outbox {
  private readonly dir: string;

  constructor(@Inject(EXAMPLE_CONFIG) config: ExampleConfig) {
    this.dir = join(config.dataDir, 'outbox');
  }

  /** True if the message was sent now, false if this key was sent before. */
  sendOnce(key: string, message: string): boolean {
    try {
      // 'wx' creates the file or fails if it exists: the provider's duplicate check, atomically.
      appendFileSync(join(this.dir, `${key}.eml`), message, { flag: 'wx' });
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw error;
    }
  }
}

function keyPrefix(): string {
  try {
    return `${idempotencyKey().slice(0, 12)}…`;
  } catch {
    return 'none: called outside a run';
  }
}
