/**
 * The tamper fuzzer, run beside the conformance suite on every backend (test/stores): random single-byte flips,
 * deleted, duplicated, reordered and cross-run-spliced records, and records or checkpoints of an
 * earlier run with the same id copied in, and the run's head edited (each sealed column), deleted,
 * or copied from another run or the earlier incarnation, applied with raw row access (what an attacker with
 * database access, a bad restore or a buggy migration could do) to what recovery reads: the run's latest checkpoint and the call log of the superstep it was cut short in. Every
 * one must be `CheckpointStoreCorrupt`, with no tool run.
 *
 * `TAMPER_TRIALS` (default 16) and `TAMPER_SEED` (default fixed) set the size and the seed; a
 * failure prints the seed and the shrunk mutation, to replay it.
 */
import fc from 'fast-check';
import {
  Call,
  CheckpointStoreCorrupt,
  Executor,
  Flow,
  FlowRunner,
  ToolRegistry,
  type CallRecord,
  type CheckpointRecord,
  type CheckpointStore,
  type RunHead,
} from 'agent-adapter';
import {
  CrashingStore,
  SimulatedCrash,
  settle,
  type CheckpointStoreFixture,
  type RawStoreAccess,
} from 'agent-adapter/testing';
import { KEY } from 'agent-adapter/testing/fixtures';

/** Runs a, then b, c and d one after another in one superstep; "dies" inside `dieIn`. */
function fuzzFlow(): Flow<{ note: string }> {
  const flow = new Flow<{ note: string }>('tamper-fuzz')
    .node('first', Call('t_a', { args: () => ({ n: 1 }), into: 'note' }))
    .node('second', async (_s, ctx) => {
      await ctx.call('t_b', { n: 2 });
      await ctx.call('t_c', { n: 3 });
      return { note: String(await ctx.call('t_d', { n: 4 })) };
    })
    .edge('first', 'second')
    .end('second');
  return flow;
}

function executor(ran: string[], onTool?: (tool: string) => void): Executor {
  const registry = new ToolRegistry();
  for (const name of ['t_a', 't_b', 't_c', 't_d']) {
    registry.register(name, (a: { n: number }) => {
      onTool?.(name);
      ran.push(name);
      return `${name} ${a.n}`;
    });
  }
  return new Executor(registry);
}

/** A run cut short inside t_d: its cut superstep holds 5 call records. */
async function cutRun(store: CheckpointStore, runId: string): Promise<void> {
  const dying = new CrashingStore(store);
  const runner = new FlowRunner(
    executor([], (t) => (t === 't_d' ? dying.kill('inside t_d') : undefined)),
    { checkpoints: dying, checkpointKey: KEY },
  );
  await runner.run(fuzzFlow(), {}, { runId }).then(
    () => {
      throw new Error('the run was meant to die inside t_d');
    },
    (error: unknown) => {
      if (!(error instanceof SimulatedCrash)) throw error;
    },
  );
  await settle();
  runner.close();
}

type Mutation =
  | { kind: 'flip'; record: number; at: number; by: number }
  | { kind: 'delete'; call: number }
  | { kind: 'duplicate'; call: number; onto: number }
  | { kind: 'swap'; call: number; with: number }
  | { kind: 'splice'; call: number }
  | { kind: 'spliceCheckpoint' }
  // Rows of an earlier run with the same id (deleted, then started again), copied in under their
  // own columns with the head fixed up to hide the copy.
  | { kind: 'reincarnate'; calls: number[] }
  | { kind: 'reincarnateCheckpoint'; head: boolean }
  // The run's head: a sealed column changed, the head or the newest checkpoint deleted, or a whole
  // head (columns and seal) copied from another run or from the earlier incarnation.
  | { kind: 'head'; column: HeadColumn; by: number }
  | { kind: 'deleteHead' }
  | { kind: 'deleteLatest' }
  | { kind: 'spliceHead' }
  | { kind: 'reincarnateHead' };

const HEAD_COLUMNS = ['flow', 'step', 'status', 'segment', 'calls'] as const;
type HeadColumn = (typeof HEAD_COLUMNS)[number];
const STATUSES = ['running', 'paused', 'sleeping', 'done', 'failed'] as const;

/** What an earlier incarnation of the victim's run id left: its cut superstep and checkpoint. */
interface Earlier {
  calls: CallRecord[];
  latest: CheckpointRecord;
  head: RunHead;
}

const CALLS = 5;

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({
    kind: fc.constant('flip' as const),
    // 0 is the latest checkpoint, 1..CALLS the cut superstep's calls.
    record: fc.integer({ min: 0, max: CALLS }),
    at: fc.nat(),
    by: fc.integer({ min: 1, max: 94 }),
  }),
  fc.record({
    kind: fc.constant('delete' as const),
    call: fc.integer({ min: 0, max: CALLS - 1 }),
  }),
  fc
    .tuple(
      fc.integer({ min: 0, max: CALLS - 1 }),
      fc.integer({ min: 1, max: CALLS - 1 }),
    )
    .map(([call, d]): Mutation => ({
      kind: 'duplicate',
      call,
      onto: (call + d) % CALLS,
    })),
  fc
    .tuple(
      fc.integer({ min: 0, max: CALLS - 1 }),
      fc.integer({ min: 1, max: CALLS - 1 }),
    )
    .map(([call, d]): Mutation => ({
      kind: 'swap',
      call,
      with: (call + d) % CALLS,
    })),
  fc.record({
    kind: fc.constant('splice' as const),
    call: fc.integer({ min: 0, max: CALLS - 1 }),
  }),
  fc.constant({ kind: 'spliceCheckpoint' as const }),
  fc.record({
    kind: fc.constant('reincarnate' as const),
    calls: fc.subarray([0, 1, 2, 3, 4], { minLength: 1 }),
  }),
  fc.record({
    kind: fc.constant('reincarnateCheckpoint' as const),
    head: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('head' as const),
    column: fc.constantFrom(...HEAD_COLUMNS),
    by: fc.integer({ min: 1, max: 3 }),
  }),
  fc.constant({ kind: 'deleteHead' as const }),
  fc.constant({ kind: 'deleteLatest' as const }),
  fc.constant({ kind: 'spliceHead' as const }),
  fc.constant({ kind: 'reincarnateHead' as const }),
);

/** The head's `column` changed by `by` (another status, another flow name, a number moved). */
function edited(head: RunHead, column: HeadColumn, by: number) {
  switch (column) {
    case 'flow':
      return { flow: `${head.flow}-${by}` };
    case 'status':
      return {
        status:
          STATUSES[(STATUSES.indexOf(head.status) + by) % STATUSES.length],
      };
    default:
      // Up or down by `by`, never below 0.
      return {
        [column]:
          head[column] >= by && by % 2 === 0
            ? head[column] - by
            : head[column] + by,
      };
  }
}

/** A head's columns and seal, as `editHead` writes them. */
const wholeHead = (h: RunHead) => ({
  flow: h.flow,
  step: h.step,
  status: h.status,
  segment: h.segment,
  calls: h.calls,
  sealed: h.sealed,
});

/** Changes one printable character of `text` at `at` (mod length) to another one. */
function flip(text: string, at: number, by: number): string {
  const i = at % text.length;
  const code = text.charCodeAt(i);
  const printable = code >= 32 && code < 127 ? code : 32;
  const next = 32 + ((printable - 32 + by) % 95);
  return `${text.slice(0, i)}${String.fromCharCode(next)}${text.slice(i + 1)}`;
}

async function apply(
  raw: RawStoreAccess,
  store: CheckpointStore,
  victim: string,
  donor: string,
  m: Mutation,
  earlier: Earlier | undefined,
): Promise<void> {
  const latest = (await store.latest(victim))!;
  const calls = await store.calls(victim, 1);
  const other = await store.calls(donor, 1);
  const rewrite = (c: CallRecord, sealed: string) =>
    raw.rewriteCall(store, victim, c, sealed);
  switch (m.kind) {
    case 'flip':
      if (m.record === 0)
        return raw.rewriteCheckpoint(
          store,
          victim,
          latest.step,
          flip(latest.sealed, m.at, m.by),
        );
      return rewrite(
        calls[m.record - 1]!,
        flip(calls[m.record - 1]!.sealed, m.at, m.by),
      );
    case 'delete':
      return raw.deleteCall(store, victim, calls[m.call]!);
    case 'duplicate':
      return rewrite(calls[m.onto]!, calls[m.call]!.sealed);
    case 'swap':
      await rewrite(calls[m.call]!, calls[m.with]!.sealed);
      return rewrite(calls[m.with]!, calls[m.call]!.sealed);
    case 'splice':
      return rewrite(calls[m.call]!, other[m.call]!.sealed);
    case 'spliceCheckpoint':
      return raw.rewriteCheckpoint(
        store,
        victim,
        latest.step,
        (await store.latest(donor))!.sealed,
      );
    case 'reincarnate': {
      const copies = m.calls.map((i) => earlier!.calls[i]!);
      const head = (await store.head(victim))!;
      return raw.insertCalls(store, victim, copies, head.calls + copies.length);
    }
    case 'reincarnateCheckpoint': {
      // The earlier run's latest in place of the new one's (same step); the head's segment
      // moved to match it, or left as it was.
      const head = (await store.head(victim))!;
      return raw.insertCheckpoint(store, victim, earlier!.latest, {
        segment: m.head ? earlier!.latest.segment : head.segment,
      });
    }
    case 'head':
      return raw.editHead(
        store,
        victim,
        edited((await store.head(victim))!, m.column, m.by),
      );
    case 'deleteHead':
      return raw.deleteHead(store, victim);
    case 'deleteLatest':
      return raw.deleteCheckpoint(store, victim, latest.step);
    case 'spliceHead':
      return raw.editHead(store, victim, wholeHead((await store.head(donor))!));
    case 'reincarnateHead':
      return raw.editHead(store, victim, wholeHead(earlier!.head));
  }
}

/**
 * Declares the fuzzer's test for one store (a jest test: `npm run tamper` selects it by name).
 * Not in the shipped conformance suite: it needs fast-check, which the library does not depend on.
 */
export function tamperFuzz(
  fixture: CheckpointStoreFixture & { raw: RawStoreAccess },
): void {
  const { raw } = fixture;
  it(`tamper fuzzer (${fixture.name}): every flip, deletion, duplicate, swap, cross-run splice and copy from an earlier incarnation of what recovery reads, the head included, is CheckpointStoreCorrupt, and nothing runs`, async () => {
    const store = await fixture.make();
    let trial = 0;
    try {
      await fc.assert(
        fc.asyncProperty(mutation, async (m) => {
          const id = `tamper-${Date.now().toString(36)}-${++trial}`;
          const victim = `${id}-victim`;
          const donor = `${id}-donor`;
          let earlier: Earlier | undefined;
          if (
            m.kind === 'reincarnate' ||
            m.kind === 'reincarnateCheckpoint' ||
            m.kind === 'reincarnateHead'
          ) {
            await cutRun(store, victim);
            earlier = {
              calls: await store.calls(victim, 1),
              latest: (await store.latest(victim))!,
              head: (await store.head(victim))!,
            };
            await store.delete(victim);
          }
          await cutRun(store, victim);
          await cutRun(store, donor);
          expect(await store.calls(victim, 1)).toHaveLength(CALLS);
          await apply(raw, store, victim, donor, m, earlier);

          const ran: string[] = [];
          const recoverer = new FlowRunner(executor(ran), {
            checkpoints: store,
            checkpointKey: KEY,
          });
          const outcome = await recoverer
            .recover(fuzzFlow(), victim, { rerunInDoubt: true })
            .then(
              (r) => r,
              (e: unknown) => e,
            );
          recoverer.close();
          expect(outcome).toBeInstanceOf(CheckpointStoreCorrupt);
          expect(ran).toEqual([]);
        }),
        {
          numRuns: Number(process.env.TAMPER_TRIALS ?? 16),
          seed: Number(process.env.TAMPER_SEED ?? 20261129),
        },
      );
    } finally {
      await store.close();
    }
  });
}
