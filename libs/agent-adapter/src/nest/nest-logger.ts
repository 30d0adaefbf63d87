import { Logger } from '@nestjs/common';
import type { DurableLogger } from '../observability/logger';

/**
 * The core's logger port on Nest's `Logger` (so the application's logger, level and format apply):
 * an error that goes with a message is given as its stack, anything else as its text.
 * @internal
 */
export function nestDurableLogger(context: string): DurableLogger {
  const logger = new Logger(context);
  return {
    warn: (message, ...meta) => logger.warn(withDetails(message, meta)),
    error: (message, ...meta) => {
      const stack = meta.find((m): m is Error => m instanceof Error)?.stack;
      const rest = meta.filter((m) => !(m instanceof Error) || !m.stack);
      logger.error(withDetails(message, rest), stack);
    },
  };
}

function withDetails(message: string, meta: readonly unknown[]): string {
  if (meta.length === 0) return message;
  return `${message}: ${meta.map((m) => (m instanceof Error ? `${m.name}: ${m.message}` : String(m))).join(' ')}`;
}
