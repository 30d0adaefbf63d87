import { CheckpointStoreCorrupt, UnsealableValue } from '../../errors';
import type {
  CallRecord,
  CheckpointRecord,
} from '../checkpoints/checkpoint-store';
import type { Json } from './canonical-json';
import { KeyRing } from './key-ring';
import {
  openCall,
  openCheckpoint,
  sealCall,
  sealCheckpoint,
  type Call,
  type Checkpoint,
} from './records';
import { seal } from './seal';
import { thrownBy } from '../../../../../test/utils/specs';

const ring = new KeyRing({ current: 'records-spec-secret-0123456789abcdef' });

const checkpoint: Checkpoint = {
  runId: 'order-7',
  step: 3,
  flow: 'tickets',
  status: 'running',
  segment: 2,
  kind: 'flow',
  superstep: 3,
  state: { show: 'Hamlet', seats: 2, note: '' },
  frontier: ['pay'],
  visits: { hold: 1 },
  digest: 'digest-1',
  identity: { user: 'u1', thread: 't1' },
  idemKid: ring.current.id,
  incarnation: 1,
  logBefore: 0,
  reason: 'superstep',
};

const call: Call = {
  runId: 'order-7',
  incarnation: 1,
  segment: 2,
  seq: 4,
  superstep: 3,
  node: 'pay',
  index: 0,
  tool: 'charge_card',
  phase: 'done',
  argsHash: 'hash-1',
  outcome: { ok: true, value: 'charged' },
  at: 1700000000000,
};

/** The CheckpointStoreCorrupt `fn` throws (fails the test otherwise). */
const corrupt = (fn: () => unknown): CheckpointStoreCorrupt =>
  thrownBy(CheckpointStoreCorrupt, fn);

/** `record` with `from` in its sealed body replaced by `to` (the test fails if it is not there). */
function forgedBody<R extends { sealed: string }>(
  record: R,
  from: string,
  to: string,
): R {
  const sealed = record.sealed.replace(from, to);
  expect(sealed).not.toBe(record.sealed);
  return { ...record, sealed };
}

describe('checkpoint records', () => {
  it('round-trips a checkpoint through its record', () => {
    const record = sealCheckpoint(ring, checkpoint);
    expect(record).toMatchObject({
      runId: 'order-7',
      step: 3,
      flow: 'tickets',
      status: 'running',
      segment: 2,
    });
    expect(typeof record.sealed).toBe('string');
    expect(openCheckpoint(ring, record)).toEqual(checkpoint);
  });

  it('keeps the columns out of the sealed body (they are in the MAC)', () => {
    const body = JSON.parse(
      sealCheckpoint(ring, checkpoint).sealed.split('.').slice(3).join('.'),
    ) as Record<string, unknown>;
    for (const column of ['runId', 'step', 'flow', 'status', 'segment']) {
      expect(body).not.toHaveProperty(column);
    }
    expect(body.identity).toEqual({ user: 'u1', thread: 't1' });
  });

  it.each<[string, Partial<CheckpointRecord>]>([
    ['status', { status: 'done' }],
    ['status (to paused)', { status: 'paused' }],
    ['segment', { segment: 3 }],
    ['step', { step: 4 }],
    ['flow', { flow: 'other-flow' }],
    ['runId', { runId: 'order-8' }],
  ])('is corrupt when the %s column is edited', (_column, edit) => {
    const record = { ...sealCheckpoint(ring, checkpoint), ...edit };
    const error = corrupt(() => openCheckpoint(ring, record));
    expect(error.runId).toBe(record.runId);
    expect(error.message).toMatch(/does not match its signature/);
  });

  it('is corrupt when the sealed body is edited', () => {
    const record = sealCheckpoint(ring, checkpoint);
    const forged = forgedBody(record, '"seats":2', '"seats":9');
    corrupt(() => openCheckpoint(ring, forged));
  });

  it('is corrupt when its segment is not one of its incarnation', () => {
    for (const segment of [0, 5]) {
      // incarnation 1 at step 3: segments 1..4 only (one new segment per claim or resume)
      const record = sealCheckpoint(ring, { ...checkpoint, segment });
      expect(corrupt(() => openCheckpoint(ring, record)).message).toMatch(
        /segment \d is not one of incarnation 1's/,
      );
    }
  });

  it('is corrupt when another run’s sealed body is copied in', () => {
    const mine = sealCheckpoint(ring, checkpoint);
    const theirs = sealCheckpoint(ring, { ...checkpoint, runId: 'order-8' });
    corrupt(() => openCheckpoint(ring, { ...mine, sealed: theirs.sealed }));
  });

  it('is corrupt when it was signed with a key the ring lacks', () => {
    const other = new KeyRing({
      current: 'another-secret-0123456789abcdefghij',
    });
    const error = corrupt(() =>
      openCheckpoint(ring, sealCheckpoint(other, checkpoint)),
    );
    expect(error.message).toContain(other.current.id);
  });

  it('is corrupt (unreadable) when the row holds something else', () => {
    const record = sealCheckpoint(ring, checkpoint);
    const error = corrupt(() =>
      openCheckpoint(ring, { ...record, sealed: 'hello' }),
    );
    expect(error.message).toMatch(/unreadable/);
    corrupt(() => openCheckpoint(ring, { ...record, sealed: null as never }));
  });

  it('is corrupt (unreadable) when a validly signed body lacks fields', () => {
    const { sealed: _ignored, ...columns } = sealCheckpoint(ring, checkpoint);
    const coords = { kind: 'checkpoint' as const, ...columns };
    const bodies: Json[] = [{}, [], 'text', { superstep: 1 }, { frontier: [] }];
    for (const body of bodies) {
      const error = corrupt(() =>
        openCheckpoint(ring, { ...columns, sealed: seal(ring, coords, body) }),
      );
      expect(error.message).toMatch(/missing fields/);
    }
  });

  it('refuses to seal a checkpoint whose state is not JSON', () => {
    expect(() =>
      sealCheckpoint(ring, {
        ...checkpoint,
        state: { at: new Date() } as never,
      }),
    ).toThrow(UnsealableValue);
  });
});

describe('call records', () => {
  it('round-trips a call through its record', () => {
    const record = sealCall(ring, call);
    expect(record).toMatchObject({
      runId: 'order-7',
      segment: 2,
      seq: 4,
      superstep: 3,
    });
    expect(openCall(ring, record)).toEqual(call);
  });

  it('seals the run incarnation: a record of another incarnation is corrupt, named', () => {
    const record = sealCall(ring, call);
    expect(openCall(ring, record, 1)).toEqual(call);
    const error = corrupt(() => openCall(ring, record, 77));
    expect(error.message).toMatch(
      /call record 2\/4 \(superstep 3\) belongs to incarnation 1 .* incarnation 77: it was copied from an earlier run/,
    );
    // Editing the body's incarnation breaks the seal.
    const forged = forgedBody(record, '"incarnation":1', '"incarnation":77');
    expect(corrupt(() => openCall(ring, forged, 77)).message).toMatch(
      /signature/,
    );
  });

  it('drops undefined optional fields', () => {
    const started: Call = {
      ...call,
      phase: 'started',
      args: { show: 'Hamlet' },
      outcome: undefined,
    };
    const opened = openCall(ring, sealCall(ring, started));
    expect(opened).not.toHaveProperty('outcome');
    expect(opened.args).toEqual({ show: 'Hamlet' });
  });

  it.each<[string, Partial<CallRecord>]>([
    ['seq', { seq: 5 }],
    ['segment', { segment: 1 }],
    ['superstep', { superstep: 2 }],
    ['runId', { runId: 'order-8' }],
  ])('is corrupt when the %s column is edited', (_column, edit) => {
    const record = { ...sealCall(ring, call), ...edit };
    const error = corrupt(() => openCall(ring, record));
    expect(error.runId).toBe(record.runId);
    expect(error.message).toContain(
      `call record ${record.segment}/${record.seq}`,
    );
  });

  it('is corrupt when the outcome is forged', () => {
    const forged = forgedBody(sealCall(ring, call), '"charged"', '"refunded"');
    corrupt(() => openCall(ring, forged));
  });

  it('is corrupt when records swap places', () => {
    const first = sealCall(ring, { ...call, seq: 1, phase: 'started' });
    const second = sealCall(ring, { ...call, seq: 2 });
    corrupt(() => openCall(ring, { ...first, sealed: second.sealed }));
    corrupt(() => openCall(ring, { ...second, sealed: first.sealed }));
  });

  it('does not accept a checkpoint body as a call (different kind)', () => {
    const coords = {
      kind: 'checkpoint' as const,
      runId: 'order-7',
      segment: 2,
      seq: 4,
      superstep: 3,
    };
    const sealed = seal(ring, coords, { phase: 'done', tool: 'charge_card' });
    corrupt(() =>
      openCall(ring, {
        runId: 'order-7',
        segment: 2,
        seq: 4,
        superstep: 3,
        sealed,
      }),
    );
  });

  it('is corrupt (unreadable) when a validly signed body lacks fields', () => {
    const columns = { runId: 'order-7', segment: 2, seq: 4, superstep: 3 };
    const coords = { kind: 'call' as const, ...columns };
    const bodies: Json[] = [{}, { phase: 'done' }, { tool: 'x' }, [1]];
    for (const body of bodies) {
      const error = corrupt(() =>
        openCall(ring, { ...columns, sealed: seal(ring, coords, body) }),
      );
      expect(error.message).toMatch(/missing fields/);
    }
  });

  it('round-trips the policy fields: attempt, previous, attempts, a synchronous decision', () => {
    const retried: Call = {
      ...call,
      phase: 'started',
      outcome: undefined,
      args: { show: 'Hamlet' },
      attempt: 3,
      previous: { name: 'Error', message: 'busy' },
      decision: { approved: true, by: 'alice', reason: 'ok', edited: true },
    };
    const opened = openCall(ring, sealCall(ring, retried));
    expect(opened).toMatchObject({
      attempt: 3,
      previous: { name: 'Error', message: 'busy' },
      decision: { approved: true, by: 'alice', reason: 'ok', edited: true },
    });
    const approving: Call = { ...call, phase: 'approving', outcome: undefined };
    expect(openCall(ring, sealCall(ring, approving)).phase).toBe('approving');
    const done: Call = { ...call, attempts: 3 };
    expect(openCall(ring, sealCall(ring, done)).attempts).toBe(3);
  });

  it.each<[string, Json, RegExp]>([
    ['an unknown phase', { phase: 'retrying' }, /unknown phase "retrying"/],
    ['attempt 1 (first attempts carry none)', { attempt: 1 }, /bad attempt/],
    ['a fractional attempt', { attempt: 2.5 }, /bad attempt/],
    ['attempts as a string', { attempts: '3' }, /bad attempts/],
    [
      'a previous error without message',
      { previous: { name: 'E' } },
      /bad previous/,
    ],
    ['a decision without approved', { decision: { by: 'a' } }, /bad decision/],
    [
      'a decision with a numeric by',
      { decision: { approved: true, by: 7 } },
      /bad decision/,
    ],
    [
      'a decision edited: false',
      { decision: { approved: true, edited: false } },
      /bad decision/,
    ],
  ])(
    'is corrupt (unreadable) when a validly signed body has %s',
    (_what, fields, why) => {
      const columns = { runId: 'order-7', segment: 2, seq: 4, superstep: 3 };
      const coords = { kind: 'call' as const, ...columns };
      const body = {
        phase: 'started',
        tool: 'charge_card',
        node: 'pay',
        index: 0,
        argsHash: 'h',
        at: 1,
        incarnation: 1,
        ...(fields as { [key: string]: Json }),
      };
      const error = corrupt(() =>
        openCall(ring, { ...columns, sealed: seal(ring, coords, body) }),
      );
      expect(error.message).toMatch(why);
    },
  );
});
