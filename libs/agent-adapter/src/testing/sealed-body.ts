import type { CallRecord } from '../exec/checkpoints/checkpoint-store';

/**
 * The JSON body of a sealed checkpoint or call record, read WITHOUT checking its signature (and
 * only for records stored unencrypted): for tests that look at what a run wrote.
 */
export function unverifiedBody(sealed: string): Record<string, unknown> {
  // The envelope is `version.keyId.mac.body` (exec/durable/seal.ts); the body may contain dots.
  return JSON.parse(sealed.split('.').slice(3).join('.')) as Record<
    string,
    unknown
  >;
}

/** A call record with its phase, tool and node read from the (unverified) body. */
export interface DecodedCall {
  record: CallRecord;
  phase: string;
  tool: string;
  node: string;
}

export function decodeCall(record: CallRecord): DecodedCall {
  const body = unverifiedBody(record.sealed);
  return {
    record,
    phase: String(body.phase),
    tool: String(body.tool),
    node: String(body.node),
  };
}
