import type {
  DurableEvents,
  RunRecoveredEvent,
} from '../events/durable.events';
import type { CallIdentity } from '../exec/durable/records';

/** The outcomes a recovery sweep tells apart. @publicApi */
export type RecoveryOutcomeKind =
  | 'recovered'
  | 'needsDecision'
  | 'held'
  | 'elsewhere'
  | 'accessDenied'
  | 'failed';

/**
 * What one recovery sweep saw, per outcome: how many runs had each (`counts`), and their run ids.
 * Each list keeps the first 1,000 ids of its outcome (the first to settle), so a sweep over any
 * number of runs returns a bounded summary; every run has its own log line whatever the lists keep.
 * @publicApi
 */
export interface RecoverySummary {
  /** Runs recovered (now done, failed, running elsewhere, or paused). */
  recovered: string[];
  /** Runs with calls in doubt of non-idempotent tools: nothing was run or written. */
  needsDecision: string[];
  /** Runs whose owner's lease has not expired (the owner may be alive). */
  held: string[];
  /** Runs another worker claimed first (a lost recovery race: nothing to do here). */
  elsewhere: string[];
  /** Runs refused for their identity (a principal is needed). */
  accessDenied: string[];
  /** Runs that could not be recovered for another reason (logged with the error). */
  failed: string[];
  /** How many runs had each outcome, every run counted (a list may hold fewer ids). */
  counts: Record<RecoveryOutcomeKind, number>;
}

/** What a recovery did with the calls of the superstep the crash cut short. @internal */
export type RecoveredCallSet = Pick<RunRecoveredEvent, 'replayed' | 'rerun'>;

/**
 * The calls each recovery of a sweep replayed and ran again, heard from `run.recovered` (emitted
 * before the recovery's outcome settles) and taken when its log line is written. Listens only
 * while the sweep lasts; an entry lives until its run is reported, so memory stays bounded by the
 * recoveries in flight.
 * @internal
 */
export class RecoveredCalls {
  private readonly byRun = new Map<string, RecoveredCallSet>();
  private readonly off: () => void;

  constructor(events: DurableEvents | undefined) {
    this.off =
      events?.on('run.recovered', ({ runId, replayed, rerun }) => {
        this.byRun.set(runId, { replayed, rerun });
      }) ?? (() => undefined);
  }

  /** The run's calls (once), or undefined when no `run.recovered` was heard for it. */
  take(runId: string): RecoveredCallSet | undefined {
    const calls = this.byRun.get(runId);
    this.byRun.delete(runId);
    return calls;
  }

  close(): void {
    this.off();
    this.byRun.clear();
  }
}

/**
 * "replayed charge_card, hold_seats; ran again email_tickets (idempotent)": tool names in order
 * of first appearance, with a count when a tool had more than one call ("charge_card x2").
 */
export function describeCalls({ replayed, rerun }: RecoveredCallSet): string {
  if (!replayed.length && !rerun.length)
    return 'no finished call to replay, none run again';
  return [
    ...(replayed.length ? [`replayed ${tally(replayed)}`] : []),
    ...(rerun.length ? [`ran again ${tally(rerun)} (idempotent)`] : []),
  ].join('; ');
}

function tally(calls: readonly CallIdentity[]): string {
  const counts = new Map<string, number>();
  for (const { tool } of calls) counts.set(tool, (counts.get(tool) ?? 0) + 1);
  return [...counts]
    .map(([tool, n]) => (n > 1 ? `${tool} x${n}` : tool))
    .join(', ');
}
