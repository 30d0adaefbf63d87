import { Messages } from '../../errors/messages';
import type { Call, CallIdentity, CallOutcome, Resolution } from './records';

export type Prior =
  | {
      kind: 'done';
      argsHash: string;
      outcome: CallOutcome;
      call: Call;
      /** Not a record: what an operator found the call in doubt (`call`) returned. */
      resolved?: Resolution;
    }
  /** Found not to have run (a resolution): it runs now, even in a run restored from a backup. */
  | { kind: 'cleared'; argsHash: string; call: Call }
  | { kind: 'inDoubt'; argsHash: string; why: string; call: Call };

export function identityKey(id: CallIdentity): string {
  return JSON.stringify([id.node, id.index, id.tool]);
}

/** Why a call whose last record is `call` may have run unrecorded; undefined when it is not in doubt. */
function doubtOf(call: Call): string | undefined {
  switch (call.phase) {
    case 'started':
      return call.attempt === undefined
        ? 'started, no result recorded'
        : `started (attempt ${call.attempt}), no result recorded`;
    case 'unrecordable':
      return `ran, but its result could not be recorded (${call.reason ?? 'unsealable'})`;
    case 'approving':
      // The spec: "a crash while a synchronous approval waited" leaves the call in doubt.
      return 'was waiting for a synchronous approval, no decision recorded';
    case 'restored':
      return Messages.restoredCall();
    default:
      return undefined;
  }
}

/**
 * What the cut-short superstep already did, by call identity. Records are read in (segment, seq)
 * order and the last record of an identity decides: a later segment's rerun supersedes an earlier
 * segment's doubt, and a `done` replays wherever it was written.
 */
export class ReplayBook {
  private readonly byIdentity = new Map<string, Prior>();

  /**
   * `resolutions`: what calls in doubt really did (the checkpoint's). Each applies only while the
   * record it resolves is still the call's last: `ran` replays its outcome, `not run` clears the
   * call to run as if it never started.
   */
  constructor(calls: readonly Call[], resolutions: readonly Resolution[] = []) {
    for (const call of calls) {
      const key = identityKey(call);
      const why = doubtOf(call);
      if (why !== undefined)
        this.byIdentity.set(key, {
          kind: 'inDoubt',
          argsHash: call.argsHash,
          why,
          call,
        });
      else if (call.phase === 'done' && call.outcome)
        this.byIdentity.set(key, {
          kind: 'done',
          argsHash: call.argsHash,
          outcome: call.outcome,
          call,
        });
      // Waiting for an approval: the tool has not run, so it is neither done nor in doubt.
      else if (call.phase === 'pending') this.byIdentity.delete(key);
    }
    for (const r of resolutions) {
      const key = identityKey(r);
      const prior = this.byIdentity.get(key);
      if (
        prior?.kind !== 'inDoubt' ||
        prior.call.segment !== r.segment ||
        prior.call.seq !== r.seq
      )
        continue; // the call ran again since: its own records speak
      if (!r.ran)
        this.byIdentity.set(key, {
          kind: 'cleared',
          argsHash: prior.argsHash,
          call: prior.call,
        });
      else {
        this.byIdentity.set(key, {
          kind: 'done',
          argsHash: prior.argsHash,
          outcome: r.outcome ?? { ok: true },
          call: prior.call,
          resolved: r,
        });
      }
    }
  }

  lookup(id: CallIdentity): Prior | undefined {
    return this.byIdentity.get(identityKey(id));
  }

  /** What recovery knows of every call identity: replays (`done`) and calls in doubt. */
  priors(): Prior[] {
    return [...this.byIdentity.values()];
  }

  /** Calls that may or may not have run. */
  inDoubt(): Array<Extract<Prior, { kind: 'inDoubt' }>> {
    return [...this.byIdentity.values()].filter(
      (p): p is Extract<Prior, { kind: 'inDoubt' }> => p.kind === 'inDoubt',
    );
  }
}
