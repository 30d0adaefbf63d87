import { CheckpointStoreUnavailable } from '../../errors';
import { Messages } from '../../errors/messages';

/**
 * Which driver errors may pass (the one place that knows): a dropped or refused connection, a
 * server shutting down or failing over, a lock held past SQLite's busy timeout, a script or
 * replica busy. After one, a write's outcome is unknown: the writer reads back what was stored
 * and tries again (SegmentWriter). Anything else (a constraint, a syntax error, a refusal) is not
 * retried.
 */

/** Postgres SQLSTATEs: connection exceptions (class 08), shutdowns, capacity, serialization. */
const PG_TRANSIENT = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
  '40001', // serialization_failure
  '40P01', // deadlock_detected
]);

const NET_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

const TRANSIENT_MESSAGES = [
  /Connection terminated/i, // pg
  /terminating connection/i, // pg, the server's notice
  /Connection is closed/i, // ioredis
  /Stream isn't writeable/i, // ioredis, offline queue disabled
  // ioredis `commandTimeout`: the only way a command lost with its connection ends when
  // `autoResendUnfulfilledCommands` is off (ioredis drops it unsettled); it may have run.
  /^Command timed out$/,
  /^(LOADING|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|BUSY)\b/, // Redis replies
];

/** Why `error` may pass, or undefined when it is not a transient store failure. */
export function transientReason(error: unknown): string | undefined {
  if (error instanceof CheckpointStoreUnavailable)
    return error.transient ? error.message : undefined;
  // Duck-typed, not `instanceof Error`: a socket error made by Node's core is not an instance of
  // the Error of a vm context (jest's sandbox), and was not recognised there.
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, name, message } = error as {
    code?: unknown;
    name?: unknown;
    message?: unknown;
  };
  if (typeof message !== 'string') return undefined;
  const text = `${String(name)}: ${message}`;
  if (typeof code === 'string') {
    if (PG_TRANSIENT.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return text;
    if (NET_CODES.has(code)) return text;
    if (/^SQLITE_(BUSY|LOCKED)/.test(code)) return text;
  }
  if (name === 'MaxRetriesPerRequestError') return text; // ioredis gave up on a command
  if (TRANSIENT_MESSAGES.some((pattern) => pattern.test(message))) return text;
  return undefined;
}

/**
 * Runs a store operation, turning a transient driver failure into a transient
 * `CheckpointStoreUnavailable` (the driver error as its cause); other errors pass unchanged.
 */
export async function guarded<T>(
  store: string,
  runId: string | undefined,
  operation: () => Promise<T>,
): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw interrupted(store, runId, error);
  }
}

/**
 * What `guarded` throws for `error`: for a write path that is one async function of its own (a
 * wrapper's promise and await per write are most of what an unoptimized write costs the hooks).
 */
export function interrupted(
  store: string,
  runId: string | undefined,
  error: unknown,
): unknown {
  const why = transientReason(error);
  if (why === undefined || error instanceof CheckpointStoreUnavailable)
    return error;
  return new CheckpointStoreUnavailable(
    Messages.storeInterrupted(store, why, runId),
    runId,
    { cause: error, transient: true },
  );
}
