import { Messages } from '../../errors/messages';
import { RunAccessDenied } from '../../errors';
import type { Checkpoint, RunIdentity } from '../../exec/durable/records';
import type { ResumeDecision } from '../flow.interfaces';
import type { ResumePolicy } from './flow-runner.options';

/**
 * Who may act on a run: the identity sealed into it (end user, thread, principal), checked before
 * anything else, so a stranger learns nothing of the run, not even its flow.
 */

/** The identity a ctx gives, checked: strings only, absent keys left out. */
export function identityOf(ctx: RunIdentity | undefined): RunIdentity {
  const out: RunIdentity = {};
  for (const key of ['user', 'thread', 'principal'] as const) {
    const value = ctx?.[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') throw new TypeError(Messages.ctxField(key));
    out[key] = value;
  }
  return out;
}

/**
 * Without a ctx the run's user and thread are restored, unless it acts with a principal (which the
 * caller must show). With a ctx, it must be the run's own identity.
 */
export function checkAccess(
  cp: Checkpoint,
  ctx: RunIdentity | undefined,
): RunIdentity {
  const stored = cp.identity;
  if (!ctx) {
    if (stored.principal !== undefined) {
      throw new RunAccessDenied(cp.runId, Messages.principalNeedsCtx());
    }
    return stored;
  }
  const given = identityOf(ctx);
  for (const key of ['user', 'thread', 'principal'] as const) {
    if (given[key] !== stored[key]) {
      throw new RunAccessDenied(cp.runId, Messages.ctxFieldDiffers(key));
    }
  }
  return stored;
}

/**
 * The identity a caller acts with on the run: its own (`checkAccess`), or, for a ctx that is not
 * the run's, the run's identity if `allow` lets that requester in (the run keeps its identity).
 */
export async function accessAs(
  cp: Checkpoint,
  ctx: RunIdentity | undefined,
  allow?: (cp: Checkpoint, requester: RunIdentity) => Promise<boolean>,
): Promise<RunIdentity> {
  try {
    return checkAccess(cp, ctx);
  } catch (error) {
    if (!(error instanceof RunAccessDenied) || !ctx || !allow) throw error;
    if (!(await allow(cp, identityOf(ctx)))) throw error;
    return cp.identity;
  }
}

/**
 * Whether the resume policy lets `requester` (not the run's identity) resume the run: asked only
 * for a paused run, and only `true` allows.
 */
export async function resumePolicyAllows(
  policy: ResumePolicy | undefined,
  cp: Checkpoint,
  requester: RunIdentity,
  decision: ResumeDecision,
): Promise<boolean> {
  if (!policy || cp.status !== 'paused' || !cp.pending) return false;
  const allowed = await policy({
    runId: cp.runId,
    flow: cp.flow,
    run: { ...cp.identity },
    requester: { ...requester },
    pending: { ...cp.pending },
    decision: { ...decision },
  });
  return allowed === true;
}
