import type { SuperstepScope } from '../../exec/call-context';
import type { ApprovalPort } from '../../exec/approvals';
import type { CheckpointStore } from '../../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../../exec/durable/key-ring';
import type { Checkpoint } from '../../exec/durable/records';
import type { ReplayBook } from '../../exec/durable/replay';
import type { SegmentWriter } from '../../exec/durable/segment-writer';
import { StreamPublisher } from '../../exec/stream-publisher';
import type { RunnerSettings } from './flow-runner.options';

/** What every superstep a runner drives shares, whatever its run. */
export interface ScopeParts {
  store: CheckpointStore;
  ring: KeyRing;
  streams: RunnerSettings['streams'];
  approvals: ApprovalPort | undefined;
}

/**
 * The scope the nodes of the superstep `cp` opens share: its run's identity, the segment's write
 * channel, its stream publisher (whose entries are stored only once the calls before them are).
 */
export function superstepScope(
  cp: Checkpoint,
  log: SegmentWriter,
  book: ReplayBook | undefined,
  parts: ScopeParts,
): SuperstepScope {
  const { ring, streams, approvals } = parts;
  return {
    runId: cp.runId,
    flow: cp.flow,
    superstep: cp.superstep,
    identity: cp.identity,
    log,
    ring,
    idemKid: cp.idemKid,
    incarnation: cp.incarnation,
    inflight: new Set(),
    closed: false,
    stream: new StreamPublisher({
      store: parts.store,
      ring,
      runId: cp.runId,
      segment: cp.segment,
      incarnation: cp.incarnation,
      superstep: cp.superstep,
      keep: streams.keep,
      bell: streams.bell,
      ready: async () => {
        await log.flushed();
        if (log.failure !== undefined) throw log.failure;
      },
    }),
    ...(cp.decisions && { decisions: cp.decisions }),
    ...(cp.restored && { restored: cp.restored }),
    ...(approvals && { approvals }),
    ...(book && { replay: book }),
    replayed: [],
    rerun: [],
    unreplayed: [],
  };
}
