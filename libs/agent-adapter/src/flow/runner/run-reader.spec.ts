import fc from 'fast-check';
import { CheckpointStoreCorrupt } from '../../errors';
import { assertNoGaps } from './run-reader';
import { thrownBy } from '../../../../../test/utils/specs';

const RUN = 'run-1';

describe('assertNoGaps', () => {
  const recs = (...pairs: Array<[number, number]>) =>
    pairs.map(([segment, seq]) => ({ segment, seq }));

  it('accepts 1..n in every segment, and an empty log', () => {
    expect(() => assertNoGaps(RUN, [])).not.toThrow();
    expect(() => assertNoGaps(RUN, recs([1, 1], [1, 2], [1, 3]))).not.toThrow();
    expect(() =>
      assertNoGaps(RUN, recs([1, 1], [1, 2], [2, 1], [4, 1], [4, 2])),
    ).not.toThrow();
  });

  it.each<[string, Array<[number, number]>, RegExp]>([
    [
      'a gap',
      [
        [1, 1],
        [1, 3],
      ],
      /segment 1 .*expected record 2, found 3/,
    ],
    [
      'a duplicate',
      [
        [1, 1],
        [1, 2],
        [1, 2],
      ],
      /expected record 3, found 2/,
    ],
    ['a log not starting at 1', [[1, 2]], /expected record 1, found 2/],
    [
      'a later segment not starting at 1',
      [
        [1, 1],
        [2, 2],
      ],
      /segment 2 .*found 2/,
    ],
    [
      'a record 0',
      [
        [3, 0],
        [3, 1],
      ],
      /segment 3 .*found 0/,
    ],
  ])('rejects %s with CheckpointStoreCorrupt', (_what, pairs, message) => {
    const error = thrownBy(CheckpointStoreCorrupt, () =>
      assertNoGaps(RUN, recs(...pairs)),
    );
    expect(error.runId).toBe(RUN);
    expect(error.message).toMatch(message);
  });

  const segmentSizes = fc.array(fc.integer({ min: 1, max: 6 }), {
    minLength: 1,
    maxLength: 5,
  });
  const numbered = (sizes: number[]) =>
    sizes.flatMap((n, s) =>
      Array.from({ length: n }, (_, i) => ({ segment: s + 1, seq: i + 1 })),
    );

  it('accepts any complete numbering, and any log cut short at the end of a segment', () => {
    fc.assert(
      fc.property(segmentSizes, fc.nat(), (sizes, cut) => {
        const records = numbered(sizes);
        assertNoGaps(RUN, records);
        const s = (cut % sizes.length) + 1;
        const last = records.filter((r) => r.segment === s).length;
        assertNoGaps(
          RUN,
          records.filter((r) => !(r.segment === s && r.seq === last)),
        );
      }),
      { numRuns: 150 },
    );
  });

  it('rejects any log missing a record that is not its segment’s last', () => {
    fc.assert(
      fc.property(segmentSizes, fc.nat(), (sizes, pick) => {
        const records = numbered(sizes);
        const candidates = records.filter(
          (r) => r.seq < (sizes[r.segment - 1] ?? 0),
        );
        fc.pre(candidates.length > 0);
        const gone = candidates[pick % candidates.length];
        expect(() =>
          assertNoGaps(
            RUN,
            records.filter((r) => r !== gone),
          ),
        ).toThrow(CheckpointStoreCorrupt);
      }),
      { numRuns: 150 },
    );
  });

  it('rejects any log with a record repeated', () => {
    fc.assert(
      fc.property(segmentSizes, fc.nat(), (sizes, pick) => {
        const records = numbered(sizes);
        const i = pick % records.length;
        const twice = [...records.slice(0, i + 1), ...records.slice(i)];
        expect(() => assertNoGaps(RUN, twice)).toThrow(CheckpointStoreCorrupt);
      }),
      { numRuns: 150 },
    );
  });
});
