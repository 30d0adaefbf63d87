import { CheckpointStoreCorrupt } from '../../errors';
import { Messages } from '../../errors/messages';
import type { RunHead } from '../checkpoints/checkpoint-store';
import type { KeyRing } from './key-ring';
import { seal } from './seal';
import { corrupt, openBody } from './sealed-body';

/**
 * The run head's seal. The head is what every tool trusts first (`listUnfinished`, `list`, the
 * claim's compare-and-set, `prune`), so its columns are signed like the records: a status edited to
 * `done`, a step, segment or call count changed, is `CheckpointStoreCorrupt` wherever it is read,
 * never a conflict or a finished run. Owner, lease and `updatedAt` stay outside: a lease renewal
 * writes them without a key, and a changed lease can at worst let another worker claim a live
 * run, whose calls in flight then fail closed (in doubt), never run twice.
 */

/** What a head seal covers: the head's safety columns and the run's incarnation. */
export interface HeadFacts extends Pick<
  RunHead,
  'runId' | 'flow' | 'step' | 'status' | 'segment' | 'calls'
> {
  /** The run's incarnation (its checkpoints'): a head of an earlier run with this id does not fit. */
  incarnation: number;
}

function headCoords(h: Omit<HeadFacts, 'incarnation'>) {
  // Keys in canonical (sorted) order: the encoder then has nothing to sort.
  return {
    calls: h.calls,
    flow: h.flow,
    kind: 'head' as const,
    runId: h.runId,
    segment: h.segment,
    status: h.status,
    step: h.step,
  };
}

/**
 * `write`: a token no other write carries (the writer's). Two workers racing for a run can leave
 * the same facts (a claim of the same segment from the same head); with the token the seal is
 * unique to one write, so a writer reading the head back after a failure (confirmed-write.ts)
 * never takes a rival's write for its own.
 */
export function sealHead(
  ring: KeyRing,
  facts: HeadFacts,
  write?: string,
): string {
  const content: { incarnation: number; write?: string } = {
    incarnation: facts.incarnation,
  };
  if (write !== undefined) content.write = write;
  return seal(ring, headCoords(facts), content);
}

/**
 * The head, verified: its incarnation. `CheckpointStoreCorrupt` when the seal is missing or does
 * not match the head's columns (status, step, segment, call count, flow or run id changed).
 */
export function openHead(ring: KeyRing, head: RunHead): number {
  const what = 'the run head';
  if (!head.sealed) {
    throw corrupt(head.runId, what, {
      why: 'unreadable',
      detail: 'it has no seal',
    });
  }
  const content = openBody<{ incarnation?: unknown }>(
    ring,
    headCoords(head),
    head,
    what,
    [],
  );
  if (!Number.isInteger(content?.incarnation)) {
    throw new CheckpointStoreCorrupt(
      Messages.corruptUnreadable(head.runId, what, 'missing fields'),
      head.runId,
    );
  }
  return content.incarnation as number;
}
