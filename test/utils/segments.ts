/**
 * The checkpoint the segment writer's specs (`exec/durable/*.spec.ts`) write: a bare run of one
 * node `n` in incarnation 1 with no calls before it (test code, never shipped).
 */
import type { KeyRing } from 'agent-adapter/exec/durable/key-ring';
import type { Checkpoint } from 'agent-adapter/exec/durable/records';

/** `runId` running at `step` (segment 1, superstep 0, reason start unless `over` says else). */
export function bareCheckpoint(
  ring: KeyRing,
  runId: string,
  step: number,
  over: Partial<Checkpoint> = {},
): Checkpoint {
  return {
    runId,
    step,
    flow: 'f',
    status: 'running',
    segment: 1,
    kind: 'flow',
    superstep: 0,
    state: {},
    frontier: ['n'],
    visits: {},
    digest: 'd',
    identity: {},
    idemKid: ring.current.id,
    incarnation: 1,
    logBefore: 0,
    reason: 'start',
    ...over,
  };
}
