import { canonicalJson } from '../exec/durable/canonical-json';
import type {
  CallKey,
  CallRecord,
  CheckpointRecord,
  CheckpointStore,
  HistoryPage,
} from '../exec/checkpoints/checkpoint-store';
import type { KeyRing } from '../exec/durable/key-ring';
import { open, seal } from '../exec/durable/seal';
import { CliMessages } from './cli.messages';
import {
  readTwice,
  sameHead,
  verifyHistory,
  type HeadFacts,
  type Problem,
  type RunVerification,
} from './verify';

/**
 * Audit bundles: one run's rows as stored, signed as a whole, verified offline with the same checks
 * as a stored run (`verifyHistory`).
 */

export const BUNDLE_FORMAT = 'agent-adapter.bundle/2';
/** Earlier formats, refused by name (development builds). */
const RETIRED_FORMATS: ReadonlyMap<unknown, string> = new Map([
  ['agent-adapter.bundle/1', "no key of the head's last call record"],
]);

/** Everything of one run, for audit: its rows as stored, and a signature over all of it. */
export interface AuditBundle {
  format: typeof BUNDLE_FORMAT;
  runId: string;
  flow: string;
  exportedAt: string;
  head: HeadFacts & { updatedAt: number };
  checkpoints: CheckpointRecord[];
  calls: CallRecord[];
  /** `aa2.<key id>.<HMAC>` over the canonical JSON of every other field, for this run id. */
  signature: string;
}

/** Reads a run into a signed bundle (the rows as stored: each keeps its own seal). */
export async function exportRun(
  store: CheckpointStore,
  ring: KeyRing,
  runId: string,
  now: Date = new Date(),
): Promise<AuditBundle | undefined> {
  for (let attempt = 1; ; attempt++) {
    const read = await readTwice(store, runId);
    if (!read) return undefined;
    const { head, history, again } = read;
    if (!sameHead(head, again) && attempt < 5) continue;
    const content = {
      format: BUNDLE_FORMAT,
      runId,
      flow: again.flow,
      exportedAt: now.toISOString(),
      head: {
        flow: again.flow,
        step: again.step,
        status: again.status,
        segment: again.segment,
        calls: again.calls,
        sealed: again.sealed,
        updatedAt: again.updatedAt,
        // A key edited into something that is not one (NaN: no JSON) is left out: the bundle's
        // verification then reports the head, as `runs verify` does.
        ...(again.lastCall &&
          isKey(again.lastCall) && {
            lastCall: {
              segment: again.lastCall.segment,
              superstep: again.lastCall.superstep,
              seq: again.lastCall.seq,
            },
          }),
      },
      checkpoints: history.checkpoints.map(
        ({ runId, step, flow, status, segment, sealed }) => ({
          runId,
          step,
          flow,
          status,
          segment,
          sealed,
        }),
      ),
      calls: history.calls.map(
        ({ runId, segment, seq, superstep, sealed }) => ({
          runId,
          segment,
          seq,
          superstep,
          sealed,
        }),
      ),
    } satisfies Omit<AuditBundle, 'signature'>;
    // The bundle seal is the library's seal over the canonical bundle, kept without its body.
    const sealed = seal(ring, bundleCoords(runId), content);
    return { ...content, signature: sealed.split('.', 3).join('.') };
  }
}

export interface BundleVerification extends RunVerification {
  /** Whether the bundle's own signature holds (its rows were not added, removed or edited). */
  signed: boolean;
}

/**
 * Checks a bundle offline: its signature (with the key ring), then every row as `verifyHistory`
 * does, against the head facts the bundle carries.
 */
export function verifyBundle(
  ring: KeyRing,
  bundle: unknown,
): BundleVerification {
  if (!isObject(bundle) || bundle.format !== BUNDLE_FORMAT) {
    const retired = isObject(bundle) && RETIRED_FORMATS.get(bundle.format);
    throw new TypeError(
      retired
        ? CliMessages.retiredBundle(String(bundle.format), retired)
        : CliMessages.notABundle(BUNDLE_FORMAT),
    );
  }
  const { signature, ...content } = bundle as unknown as AuditBundle;
  const runId = String(content.runId);
  const problems: Problem[] = [];
  let signed = false;
  if (typeof signature !== 'string' || signature.split('.').length !== 3) {
    problems.push({ where: 'bundle', detail: 'it has no signature' });
  } else {
    let body: string | undefined;
    try {
      body = canonicalJson(content);
    } catch (error) {
      problems.push({ where: 'bundle', detail: String(error) });
    }
    if (body !== undefined) {
      const opened = open(ring, bundleCoords(runId), `${signature}.${body}`);
      signed = opened.ok;
      if (!opened.ok) {
        problems.push({
          where: 'bundle',
          detail: `the bundle does not match its signature (${opened.detail}): rows were added, removed or edited after export, or it was signed with another key`,
        });
      }
    }
  }
  const history: HistoryPage = {
    checkpoints: Array.isArray(content.checkpoints) ? content.checkpoints : [],
    calls: Array.isArray(content.calls) ? content.calls : [],
  };
  problems.push(
    ...verifyHistory(
      ring,
      runId,
      history,
      isObject(content.head) ? content.head : undefined,
    ),
  );
  return {
    runId,
    flow: typeof content.flow === 'string' ? content.flow : undefined,
    checkpoints: history.checkpoints.length,
    calls: history.calls.length,
    problems,
    signed,
  };
}

function bundleCoords(runId: string) {
  return { kind: 'bundle' as const, runId };
}

function isKey(k: CallKey): boolean {
  return [k.segment, k.superstep, k.seq].every(Number.isSafeInteger);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
