import { leaseEnd } from './lease-end';

describe('leaseEnd', () => {
  it('is the same for writes within a quarter of the lease (HOT updates), and never less than three quarters away', () => {
    const leaseMs = 15_000;
    const ends = new Set<number>();
    for (
      let now = 1_700_000_000_000;
      now < 1_700_000_000_000 + 3_750;
      now += 50
    )
      ends.add(leaseEnd(now, leaseMs));
    expect(ends.size).toBeLessThanOrEqual(2);
    for (let now = 1_700_000_000_123; now < 1_700_000_100_000; now += 997) {
      const end = leaseEnd(now, leaseMs);
      expect(end).toBeGreaterThan(now + 0.75 * leaseMs);
      expect(end).toBeLessThanOrEqual(now + leaseMs);
    }
  });

  it('works for the shortest leases', () => {
    expect(leaseEnd(1000, 3)).toBe(1003);
    expect(leaseEnd(1001, 100)).toBe(1100);
  });
});
