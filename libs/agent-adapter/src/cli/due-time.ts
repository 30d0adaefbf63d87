import {
  UNFINISHED,
  type RunHead,
  type RunStatus,
} from '../exec/checkpoints/checkpoint-store';
import type { Checkpoint } from '../exec/durable/records';
import { CliMessages } from './cli.messages';
import { time } from './format';

/** Every run status, unfinished first: the `--status` choices of `runs list` and the viewer's. */
export const RUN_STATUSES: readonly RunStatus[] = [
  ...UNFINISHED,
  'done',
  'failed',
];

/**
 * What the head's due time (`leaseExpiresAt`) is, as a label and a time: a running run's lease, a
 * sleeping run's wake time, a paused run's approval deadline (with what the clock does then).
 * Sealed times win over the head's, which is unsealed: `latest` is the verified latest checkpoint,
 * when there is one. Undefined when nothing is due (a paused run without a deadline waits for a
 * person; an ended run's last lease is only history).
 */
export function dueOf(
  head: Pick<RunHead, 'status' | 'leaseExpiresAt'>,
  latest?: Pick<Checkpoint, 'wakeAt' | 'pending'>,
): { label: string; at: number; then?: string } | undefined {
  if (head.status === 'sleeping') {
    const at = latest?.wakeAt ?? head.leaseExpiresAt;
    return at === undefined ? undefined : { label: 'wakes at', at };
  }
  if (head.status === 'paused') {
    const pending = latest?.pending;
    const at = pending?.deadline ?? (latest ? undefined : head.leaseExpiresAt);
    if (at === undefined) return undefined;
    return {
      label: 'deadline',
      at,
      ...(pending?.onTimeout && {
        then: CliMessages.onTimeout(pending.onTimeout),
      }),
    };
  }
  const at = head.leaseExpiresAt;
  return at === undefined ? undefined : { label: 'lease until', at };
}

/** The due time as one cell of `runs list`: `wakes at <time>`, `deadline <time>`, or the lease. */
export function dueCell(head: RunHead): string {
  const due = dueOf(head);
  if (!due) return '-';
  return due.label === 'lease until'
    ? time(due.at)
    : `${due.label} ${time(due.at)}`;
}
