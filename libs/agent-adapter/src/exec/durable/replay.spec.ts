import fc from 'fast-check';
import type { Call, CallIdentity, CallPhase } from './records';
import { identityKey, ReplayBook } from './replay';

const id = (node = 'pay', index = 0, tool = 'charge_card'): CallIdentity => ({
  node,
  index,
  tool,
});

let seq = 0;
function rec(
  phase: CallPhase,
  identity: CallIdentity = id(),
  over: Partial<Call> = {},
): Call {
  return {
    runId: 'r',
    incarnation: 1,
    segment: 1,
    seq: ++seq,
    superstep: 2,
    ...identity,
    phase,
    argsHash: 'h1',
    ...(phase === 'done' && { outcome: { ok: true as const, value: 'v' } }),
    ...(phase === 'unrecordable' && { reason: 'a Date instance' }),
    at: 0,
    ...over,
  };
}

/** A book of one `phase` record puts that call in doubt, saying `why`: gives the record. */
function onlyInDoubt(phase: CallPhase, why: string): Call {
  const only = rec(phase);
  const book = new ReplayBook([only]);
  expect(book.lookup(id())).toEqual({
    kind: 'inDoubt',
    argsHash: 'h1',
    why,
    call: only,
  });
  expect(book.inDoubt()).toHaveLength(1);
  return only;
}

describe('ReplayBook', () => {
  it('replays a done call with its outcome and args hash', () => {
    const done = rec('done', id(), {
      outcome: { ok: false, error: { name: 'E', message: 'm' } },
    });
    const book = new ReplayBook([rec('started'), done]);
    expect(book.lookup(id())).toEqual({
      kind: 'done',
      argsHash: 'h1',
      outcome: { ok: false, error: { name: 'E', message: 'm' } },
      call: done,
    });
    expect(book.inDoubt()).toEqual([]);
  });

  it('puts a started-only call in doubt, saying why', () => {
    onlyInDoubt('started', 'started, no result recorded');
  });

  it('puts an unrecordable call in doubt, with the reason', () => {
    const book = new ReplayBook([rec('started'), rec('unrecordable')]);
    const prior = book.lookup(id());
    expect(prior?.kind).toBe('inDoubt');
    expect(prior?.kind === 'inDoubt' && prior.why).toMatch(
      /result could not be recorded \(a Date instance\)/,
    );
    const noReason = new ReplayBook([
      rec('unrecordable', id(), { reason: undefined }),
    ]);
    expect(noReason.inDoubt()[0]?.why).toMatch(/unsealable/);
  });

  it('puts a call that waited for a synchronous approval in doubt (spec: "a crash while a synchronous approval waited")', () => {
    const approving = onlyInDoubt(
      'approving',
      'was waiting for a synchronous approval, no decision recorded',
    );
    // Once the decision is logged, the call is what its next record says.
    const decided = rec('started', id(), {
      decision: { approved: true },
    });
    expect(new ReplayBook([approving, decided]).inDoubt()[0]?.why).toBe(
      'started, no result recorded',
    );
    const done = rec('done');
    expect(new ReplayBook([approving, done]).lookup(id())?.kind).toBe('done');
  });

  it('names the attempt of a retried call that started and has no result', () => {
    const book = new ReplayBook([
      rec('started'),
      rec('started', id(), {
        attempt: 2,
        previous: { name: 'Error', message: 'busy' },
      }),
    ]);
    expect(book.inDoubt()).toHaveLength(1);
    expect(book.inDoubt()[0]?.why).toBe(
      'started (attempt 2), no result recorded',
    );
  });

  it('treats a pending call as neither done nor in doubt', () => {
    const book = new ReplayBook([rec('started'), rec('pending')]);
    expect(book.lookup(id())).toBeUndefined();
    expect(book.inDoubt()).toEqual([]);
  });

  it('lets the last record of an identity win across segments', () => {
    const rerun = [
      rec('started', id(), { segment: 1 }),
      rec('started', id(), { segment: 2 }),
      rec('done', id(), { segment: 2 }),
    ];
    expect(new ReplayBook(rerun).lookup(id())?.kind).toBe('done');

    const changedArgs = [
      rec('started', id(), { segment: 1 }),
      rec('done', id(), { segment: 1 }),
      rec('started', id(), { segment: 2, argsHash: 'h2' }),
    ];
    const prior = new ReplayBook(changedArgs).lookup(id());
    expect(prior).toMatchObject({ kind: 'inDoubt', argsHash: 'h2' });
    expect(prior?.call.segment).toBe(2);

    const approvedThenStarted = [
      rec('pending', id(), { segment: 1 }),
      rec('started', id(), { segment: 2 }),
    ];
    expect(new ReplayBook(approvedThenStarted).lookup(id())?.kind).toBe(
      'inDoubt',
    );
  });

  it('keeps identities apart by node, index and tool', () => {
    const book = new ReplayBook([
      rec('done', id('a', 0, 't')),
      rec('started', id('a', 1, 't')),
      rec('started', id('b', 0, 't')),
      rec('pending', id('a', 0, 'u')),
    ]);
    expect(book.lookup(id('a', 0, 't'))?.kind).toBe('done');
    expect(book.lookup(id('a', 1, 't'))?.kind).toBe('inDoubt');
    expect(book.lookup(id('b', 0, 't'))?.kind).toBe('inDoubt');
    expect(book.lookup(id('a', 0, 'u'))).toBeUndefined();
    expect(book.lookup(id('c', 0, 't'))).toBeUndefined();
    expect(book.inDoubt().map((p) => [p.call.node, p.call.index])).toEqual([
      ['a', 1],
      ['b', 0],
    ]);
  });

  it('does not confuse identities whose parts contain separators', () => {
    expect(identityKey(id('a","1', 0, 't'))).not.toBe(
      identityKey(id('a', 1, '0","t')),
    );
    expect(identityKey({ node: 'n', index: 1, tool: 't' })).toBe(
      identityKey({ tool: 't', index: 1, node: 'n' }),
    );
  });

  it('classifies every identity by its last record (property)', () => {
    const identities = [id('a', 0, 't'), id('a', 1, 't'), id('b', 0, 'u')];
    const record = fc.record({
      who: fc.integer({ min: 0, max: identities.length - 1 }),
      phase: fc.constantFrom<CallPhase>(
        'started',
        'done',
        'pending',
        'unrecordable',
        'approving',
      ),
      hash: fc.constantFrom('h1', 'h2'),
    });
    fc.assert(
      fc.property(fc.array(record, { maxLength: 20 }), (steps) => {
        const calls = steps.map((s, i) =>
          rec(s.phase, identities[s.who], {
            argsHash: s.hash,
            segment: 1 + Math.floor(i / 5),
          }),
        );
        const book = new ReplayBook(calls);
        identities.forEach((who, w) => {
          const last = [...steps].reverse().find((s) => s.who === w);
          const prior = book.lookup(who);
          if (!last || last.phase === 'pending') {
            expect(prior).toBeUndefined();
          } else {
            expect(prior?.kind).toBe(
              last.phase === 'done' ? 'done' : 'inDoubt',
            );
            expect(prior?.argsHash).toBe(last.hash);
          }
        });
        const expectedInDoubt = identities.filter((_, w) => {
          const last = [...steps].reverse().find((s) => s.who === w);
          return (
            last?.phase === 'started' ||
            last?.phase === 'unrecordable' ||
            last?.phase === 'approving'
          );
        });
        expect(book.inDoubt()).toHaveLength(expectedInDoubt.length);
      }),
      { numRuns: 200 },
    );
  });
});
