/**
 * The operator commands on runs that wait for a time (memory store): a sleeping run is listed,
 * shown and inspected with its sealed wake time, a paused run with its approval deadline and what
 * the clock does then, a decision of the clock is labelled as the clock's, and `runs cancel` ends a
 * sleeping run for good (no takeover wakes it afterwards).
 */
import {
  MemoryCheckpointStore,
  type CheckpointStore,
  type RecordedDecision,
  type RunDecidedEvent,
} from 'agent-adapter';
import { DurableEvents } from '../events/durable.events';
import { openCheckpoint } from '../exec/durable/records';
import { readDecisions } from '../flow/runner/decisions';
import { RUN_STATUSES } from './due-time';
import { inspectRun } from './inspect';
import { cancelRun, showRun } from './operations';
import { markRestored } from './restore';
import { inspectionText, listText, showText } from './run-text';
import { ring, runnerOn, sleep } from '../../../../test/utils/specs';
import { tickets, ticketsFlow } from '../../../../test/utils/cli-tickets';
import { napFlow, timeRuns, timeTools } from '../../../../test/utils/time-runs';

const iso = (ms: number) => new Date(ms).toISOString();

describe('operator commands on runs that wait for a time', () => {
  let store: CheckpointStore;
  beforeEach(() => {
    store = new MemoryCheckpointStore();
  });

  it('runs list: filters by sleeping; a sleeping run shows its wake time and a paused one its deadline, not a lease', async () => {
    await timeRuns(store, { sleeping: 's1', deadline: 'p1' });
    expect(RUN_STATUSES).toContain('sleeping');
    const sleeping = await store.list({ status: 'sleeping', limit: 10 });
    expect(sleeping.runs.map((r) => r.runId)).toEqual(['s1']);
    const text = listText(await store.list({ limit: 10 }));
    const wake = (await inspectRun(store, ring, 's1')).wakeAt as number;
    const deadline = (await inspectRun(store, ring, 'p1')).pending?.deadline;
    expect(text).toMatch(new RegExp(`s1 .*sleeping .*wakes at ${iso(wake)}`));
    expect(text).toMatch(
      new RegExp(`p1 .*paused .*deadline ${iso(deadline as number)}`),
    );
  });

  it('runs inspect: a sleeping verdict with the sealed wake time; nothing written', async () => {
    await timeRuns(store, { sleeping: 's1' });
    const before = (await store.head('s1'))!;
    const report = await inspectRun(store, ring, 's1');
    expect(report.verdict).toBe('sleeping');
    const sealed = openCheckpoint(
      ring,
      (await store.history('s1')).checkpoints.at(-1)!,
    ).wakeAt as number;
    expect(report.wakeAt).toBe(sealed);
    expect(report.summary).toContain(`sleeps until ${iso(sealed)}`);
    const text = inspectionText(report);
    expect(text).toMatch(new RegExp(`wakes at:\\s+${iso(sealed)}`));
    expect(text).not.toMatch(/^lease/m);
    expect(text).toMatch(/^verdict:\s+sleeping$/m);
    expect(await store.head('s1')).toEqual(before);
    // A wake time that passed: the summary says it is due.
    const later = await inspectRun(store, ring, 's1', { now: sealed + 1 });
    expect(later.summary).toMatch(/has passed: a worker's takeover wakes it/);
  });

  it('runs inspect and show: a paused run with its approval deadline and what the clock does then', async () => {
    await timeRuns(store, { deadline: 'p1' });
    const report = await inspectRun(store, ring, 'p1');
    expect(report.verdict).toBe('paused');
    const deadline = report.pending?.deadline as number;
    expect(report.pending?.onTimeout).toBe('deny');
    expect(report.summary).toContain(
      `deadline is ${iso(deadline)}: then the clock denies the call`,
    );
    expect(inspectionText(report)).toMatch(
      new RegExp(
        `deadline:\\s+${iso(deadline)}, then the clock denies the call`,
      ),
    );
    const shown = showText(await showRun(store, ring, 'p1'));
    expect(shown).toMatch(
      new RegExp(
        `deadline:\\s+${iso(deadline)}, then the clock denies the call`,
      ),
    );
    expect(shown).not.toMatch(/lease until/);
  });

  it('runs show: a sleeping run says when it wakes, not a lease', async () => {
    await timeRuns(store, { sleeping: 's1' });
    const shown = await showRun(store, ring, 's1');
    const text = showText(shown);
    expect(text).toMatch(
      new RegExp(`wakes at:\\s+${iso(shown.latest?.wakeAt as number)}`),
    );
    expect(text).not.toMatch(/lease until/);
    // The sleep is in the call log: a `$sleep` done record.
    expect(text).toMatch(/remind#1\s+\$sleep\s+done/);
  });

  it("a decision of the clock reads as the clock's: timedOut on the recorded decision and the event", async () => {
    const events = new DurableEvents();
    const decided: RunDecidedEvent[] = [];
    events.on('run.decided', (e) => decided.push(e));
    await timeRuns(store, { timedOut: 't1', failed: 'f1' }, { events });
    const denied = await readDecisions(store, ring, 't1');
    expect(denied).toEqual([
      expect.objectContaining({
        kind: 'deny',
        calls: ['decide#0'],
        tools: ['refund'],
        timedOut: true,
      }),
    ]);
    expect(denied[0]?.by).toBeUndefined();
    expect(decided.find((e) => e.runId === 't1')?.decision).toMatchObject({
      kind: 'deny',
      timedOut: true,
    });
    // The clock failing the run: a cancel by the clock, naming the call and its deadline.
    const [failed] = await readDecisions(store, ring, 'f1');
    expect(failed).toMatchObject({
      kind: 'cancel',
      calls: ['decide#0'],
      tools: ['refund'],
      timedOut: true,
    } satisfies Partial<RecordedDecision>);
    expect(failed?.reason).toMatch(/approval deadline/);
    expect(failed?.at).toEqual(expect.any(Number));
    // Printed as the clock's; the failed run waits for no approval any more.
    const text = showText(await showRun(store, ring, 't1'));
    expect(text).toMatch(/deny \(timed out\)\s+decide#0 refund\s+the clock/);
    const ended = inspectionText(await inspectRun(store, ring, 'f1'));
    expect(ended).toMatch(/cancel \(timed out\)\s+decide#0 refund\s+the clock/);
    expect(ended).not.toMatch(/Waiting for approval/);
    expect(ended).toMatch(/ApprovalTimedOut/);
  });

  it('runs cancel ends a sleeping run: its wake time goes, and no takeover wakes it afterwards', async () => {
    const ran: string[] = [];
    const w = runnerOn(store, timeTools(ran));
    const flow = napFlow(150);
    expect((await w.run(flow, { to: 'ann' }, { runId: 's1' })).status).toBe(
      'sleeping',
    );
    const cancelled = await cancelRun(store, ring, 's1', {
      by: 'ops',
      reason: 'no longer needed',
    });
    expect(cancelled.was).toBe('sleeping');
    const head = (await store.head('s1'))!;
    expect(head.status).toBe('failed');
    expect(head.leaseExpiresAt).toBeUndefined();
    const latest = openCheckpoint(
      ring,
      (await store.history('s1')).checkpoints.at(-1)!,
    );
    expect(latest).toMatchObject({ reason: 'cancel', status: 'failed' });
    expect(latest.wakeAt).toBeUndefined();
    // Past its old wake time, a takeover finds nothing due, and a recover leaves it ended.
    const takeover = w.takeOver([flow], { everyMs: 50 });
    await sleep(300);
    await takeover.stop();
    expect((await store.head('s1'))?.status).toBe('failed');
    expect(await store.listDue({ now: Date.now() + 3_600_000 })).toEqual([]);
    expect(ran).toEqual(['mail ann']);
    w.close();
  });

  it('runs restored marks a sleeping run and it keeps sleeping until its time', async () => {
    await timeRuns(store, { sleeping: 's1' });
    const wakeAt = (await inspectRun(store, ring, 's1')).wakeAt;
    const marked = await markRestored(store, ring, { by: 'ops' });
    expect(marked.marked).toEqual(['s1']);
    const report = await inspectRun(store, ring, 's1');
    expect(report).toMatchObject({ verdict: 'sleeping', wakeAt });
    expect((await store.head('s1'))?.leaseExpiresAt).toBe(wakeAt);
  });

  it('a paused run without a deadline shows none', async () => {
    const t = tickets(store, { approve: true });
    await t.runner.run(ticketsFlow(), { show: 'Lear' }, { runId: 'plain' });
    t.runner.close();
    const report = await inspectRun(store, ring, 'plain');
    expect(report.verdict).toBe('paused');
    expect(report.summary).not.toMatch(/deadline/);
    expect(inspectionText(report)).not.toMatch(/deadline|lease/);
  });
});
