/**
 * The durable tool loop (spec: "The tool loop") through OpenAIChatModel against a real local
 * chat-completions server: history checkpointed after each model reply and after the tool
 * results; parallel tool calls; crashes before and inside tools; maxSteps across recoveries;
 * approvals resumed through runToolLoop with the same run id; tamper detection. Crashes are
 * simulated in-process with the CrashingStore (agent-adapter/testing).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CheckpointConflict,
  CheckpointStoreCorrupt,
  DurableEvents,
  MemoryCheckpointStore,
  OpenAIChatModel,
  RecoveryNeedsDecision,
  SQLiteCheckpointStore,
  ToolLoop,
  ToolRegistry,
  idempotencyKey,
  recoverToolLoop,
  runToolLoop,
  type CheckpointRecord,
  type CheckpointSavedEvent,
  type CheckpointStore,
  type ChatMessage,
} from 'agent-adapter';
import {
  ChatServer,
  callTools,
  say,
  toolResults,
  type ReceivedRequest,
} from '../utils/chat-server';
import {
  CrashingStore,
  SimulatedCrash,
  unverifiedBody as bodyOf,
  settle,
  type CrashPredicate,
} from 'agent-adapter/testing';

const KEY = 'use-a-secret-from-your-vault-32b';
const HELLO: ChatMessage[] = [
  { role: 'system', content: 'You sell tickets.' },
  { role: 'user', content: 'Two seats for Hamlet, please.' },
];

/** The model's final answer repeats the tool results it was sent, so tests see what came back. */
const summarize = (request: ReceivedRequest) =>
  say(`results: ${JSON.stringify(toolResults(request))}`);

/** Crash (after the write reached the store) once the checkpoint of `step` is saved. */
const afterStep =
  (step: number): CrashPredicate =>
  (w, moment) =>
    w.kind === 'save' && moment === 'after' && w.checkpoint.step === step;

interface Backend {
  name: string;
  /** Two views of one store, as two worker processes would have. */
  open(): { first: CheckpointStore; second: CheckpointStore };
}

const dir = mkdtempSync(join(tmpdir(), 'aa-loop-'));
let files = 0;
const opened: CheckpointStore[] = [];
const BACKENDS: Backend[] = [
  {
    name: 'MemoryCheckpointStore',
    open() {
      const store = new MemoryCheckpointStore();
      return { first: store, second: store };
    },
  },
  {
    name: 'SQLiteCheckpointStore (a temp file)',
    open() {
      const path = join(dir, `loop-${++files}.db`);
      const first = new SQLiteCheckpointStore(path);
      const second = new SQLiteCheckpointStore(path);
      opened.push(first, second);
      return { first, second };
    },
  },
];

describe('The tool loop', () => {
  let server: ChatServer;
  let model: OpenAIChatModel;
  /** What really ran, in order (the external ledger). */
  let ran: string[];

  beforeEach(async () => {
    server = await ChatServer.start();
    model = new OpenAIChatModel({
      baseUrl: server.baseUrl,
      model: 'test-model',
      maxRetries: 0,
    });
    ran = [];
  });
  afterEach(async () => {
    await server.close();
    await Promise.all(opened.splice(0).map((s) => s.close()));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const tickets = (
    hooks: { inCharge?: () => void; inRate?: () => void } = {},
  ) =>
    new ToolRegistry()
      .register(
        'hold_seats',
        (a: { show: string; seats: number }) => {
          ran.push(`hold:${a.seats}`);
          return { held: a.seats, show: a.show };
        },
        {
          idempotent: true,
          description: 'Hold seats for a show',
          parameters: {
            type: 'object',
            properties: {
              show: { type: 'string' },
              seats: { type: 'integer' },
            },
            required: ['show', 'seats'],
          },
        },
      )
      .register('charge_card', (a: { amount: number }) => {
        ran.push(`charge:${a.amount}`);
        hooks.inCharge?.();
        return `charged ${a.amount} (${idempotencyKey().slice(0, 8)})`;
      })
      .register(
        'exchange_rate',
        () => {
          ran.push('rate');
          hooks.inRate?.();
          return 1.25;
        },
        { idempotent: true },
      )
      .register('decline', () => {
        ran.push('decline');
        throw new Error('card declined');
      });

  it('a plain conversation: one model call, the answer, the history checkpointed', async () => {
    server.script(say('Sure, which evening?'));
    const store = new MemoryCheckpointStore();
    const events = new DurableEvents();
    const saved: CheckpointSavedEvent[] = [];
    events.on('checkpoint.saved', (e) => saved.push(e));
    const r = await runToolLoop(model, tickets(), HELLO, {
      runId: 'chat-1',
      checkpoints: store,
      checkpointKey: KEY,
      events,
    });
    expect(r).toMatchObject({
      runId: 'chat-1',
      status: 'done',
      modelCalls: 1,
      reply: { role: 'assistant', content: 'Sure, which evening?' },
      messages: [
        ...HELLO,
        { role: 'assistant', content: 'Sure, which evening?' },
      ],
    });
    expect(saved.map((e) => [e.step, e.status])).toEqual([
      [0, 'running'],
      [1, 'done'],
    ]);
    // The model was told about every registered tool, with its description and JSON schema.
    const tools = server.requests[0]!.body.tools!;
    expect(tools.map((t) => t.function.name)).toEqual([
      'hold_seats',
      'charge_card',
      'exchange_rate',
      'decline',
    ]);
    expect(tools[0]!.function).toMatchObject({
      description: 'Hold seats for a show',
      parameters: { required: ['show', 'seats'] },
    });
    expect(server.requests[0]!.body.messages).toEqual(HELLO);
    const latest = bodyOf((await store.latest('chat-1'))!.sealed);
    expect(latest.state).toMatchObject({ messages: r.messages });
  });

  it('tool calls run and their results are fed back; the history is saved after each reply and after the results', async () => {
    server.script(
      callTools([
        {
          name: 'hold_seats',
          arguments: { show: 'Hamlet', seats: 2 },
          id: 'h',
        },
      ]),
      callTools([{ name: 'charge_card', arguments: { amount: 90 }, id: 'c' }]),
      summarize,
    );
    const store = new MemoryCheckpointStore();
    const r = await runToolLoop(model, tickets(), HELLO, {
      runId: 'chat-2',
      checkpoints: store,
      checkpointKey: KEY,
    });
    expect(r.status).toBe('done');
    expect(ran).toEqual(['hold:2', 'charge:90']);
    expect(r.modelCalls).toBe(3);
    expect(r.messages.slice(HELLO.length)).toEqual([
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          {
            id: 'h',
            name: 'hold_seats',
            arguments: { show: 'Hamlet', seats: 2 },
          },
        ],
        // The completion's finish reason and usage are kept with the reply.
        finishReason: 'tool-calls',
        usage: { inputTokens: 1, outputTokens: 1 },
      },
      {
        role: 'tool',
        toolCallId: 'h',
        name: 'hold_seats',
        content: '{"held":2,"show":"Hamlet"}',
      },
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'c', name: 'charge_card', arguments: { amount: 90 } },
        ],
        finishReason: 'tool-calls',
        usage: { inputTokens: 1, outputTokens: 1 },
      },
      {
        role: 'tool',
        toolCallId: 'c',
        name: 'charge_card',
        content: expect.stringMatching(/^charged 90 \(.{8}\)$/) as string,
      },
      {
        role: 'assistant',
        content: expect.stringContaining('"h":') as string,
        finishReason: 'stop',
        usage: { inputTokens: 1, outputTokens: 1 },
      },
    ]);
    // The second request carried the first tool result, in the API's shape.
    expect(toolResults(server.requests[1]!)).toEqual({
      h: '{"held":2,"show":"Hamlet"}',
    });
    // One checkpoint per superstep: start, reply, results, reply, results, final reply.
    const { checkpoints } = await store.history('chat-2');
    const lengths = checkpoints.map(
      (c: CheckpointRecord) =>
        (bodyOf(c.sealed).state as { messages: unknown[] }).messages.length,
    );
    expect(lengths).toEqual([2, 3, 4, 5, 6, 7]);
  });

  it('a tool that fails, a tool the model invented and arguments that are not JSON become error results the model reads', async () => {
    server.script(
      callTools([
        { name: 'decline', arguments: {}, id: 'd' },
        { name: 'teleport', arguments: { to: 'Mars' }, id: 't' },
        { name: 'charge_card', arguments: '{"amount": 9', id: 'j' },
      ]),
      summarize,
    );
    const r = await runToolLoop(model, tickets(), HELLO, { runId: 'chat-3' });
    expect(r.status).toBe('done');
    expect(ran).toEqual(['decline']); // neither the unknown tool nor the bad JSON ran anything
    const results = r.messages.filter((m) => m.role === 'tool');
    expect(results).toEqual([
      expect.objectContaining({
        toolCallId: 'd',
        isError: true,
        content: 'Error: "decline" failed (Error): card declined',
      }),
      expect.objectContaining({
        toolCallId: 't',
        isError: true,
        content: expect.stringMatching(
          /no tool named "teleport".*hold_seats, charge_card/,
        ) as string,
      }),
      expect.objectContaining({
        toolCallId: 'j',
        isError: true,
        content: expect.stringContaining('not a JSON object') as string,
      }),
    ]);
    expect(Object.keys(toolResults(server.requests[1]!))).toEqual([
      'd',
      't',
      'j',
    ]);
  });

  it('parallel tool calls of one reply run concurrently', async () => {
    let arrived = 0;
    let release!: () => void;
    const bothStarted = new Promise<void>((r) => (release = r));
    const slow = (name: string) => async () => {
      ran.push(`start:${name}`);
      if (++arrived === 2) release();
      // Run one after the other, this would wait for ever: fail instead.
      await Promise.race([
        bothStarted,
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('calls ran one at a time')), 2000),
        ),
      ]);
      ran.push(`end:${name}`);
      return name;
    };
    const registry = new ToolRegistry()
      .register('a', slow('a'))
      .register('b', slow('b'));
    server.script(
      callTools([
        { name: 'a', arguments: {}, id: 'x' },
        { name: 'b', arguments: {}, id: 'y' },
      ]),
      summarize,
    );
    const r = await runToolLoop(model, registry, HELLO, { runId: 'par' });
    expect(ran.slice(0, 2)).toEqual(['start:a', 'start:b']);
    expect(ran).toHaveLength(4);
    expect(r.reply?.content).toBe('results: {"x":"a","y":"b"}');
  });

  describe.each(BACKENDS)('crashes and recovery on $name', (backend) => {
    it('a crash after the model reply: recoverToolLoop runs its tool calls without asking the model again', async () => {
      const { first, second } = backend.open();
      server.script(
        callTools([
          {
            name: 'hold_seats',
            arguments: { show: 'Hamlet', seats: 2 },
            id: 'h',
          },
        ]),
        summarize,
      );
      const dying = new CrashingStore(first, afterStep(1));
      await expect(
        runToolLoop(model, tickets(), HELLO, {
          runId: 'crash-reply',
          checkpoints: dying,
          checkpointKey: KEY,
        }),
      ).rejects.toBeInstanceOf(SimulatedCrash);
      await settle();
      expect(server.requests).toHaveLength(1);
      expect(ran).toEqual([]);

      // The run is not finished: runToolLoop with its id refuses to start it again.
      await expect(
        runToolLoop(model, tickets(), HELLO, {
          runId: 'crash-reply',
          checkpoints: second,
          checkpointKey: KEY,
        }),
      ).rejects.toThrow(/is running.*recoverToolLoop/);

      const r = await recoverToolLoop(model, tickets(), 'crash-reply', {
        checkpoints: second,
        checkpointKey: KEY,
      });
      expect(r.status).toBe('done');
      expect(server.requests).toHaveLength(2); // the pinned reply was not asked for again
      expect(ran).toEqual(['hold:2']);
      expect(r.reply?.content).toBe(
        'results: {"h":"{\\"held\\":2,\\"show\\":\\"Hamlet\\"}"}',
      );
      expect(r.modelCalls).toBe(2);
    });

    it('a crash inside a tool: the finished call replays, the idempotent one in doubt runs again', async () => {
      const { first, second } = backend.open();
      let chargeDone!: () => void;
      const charged = new Promise<void>((r) => (chargeDone = r));
      const dying = new CrashingStore(first);
      server.script(
        callTools([
          { name: 'charge_card', arguments: { amount: 90 }, id: 'c' },
          { name: 'exchange_rate', arguments: {}, id: 'r' },
        ]),
        summarize,
      );
      const crashing = tickets({
        inCharge: () => chargeDone(),
        inRate: () => {
          throw new Error('unreachable');
        },
      });
      // exchange_rate waits until charge_card finished and its record is stored, then dies.
      const registry = new ToolRegistry()
        .register('charge_card', crashing.get('charge_card')!.handler)
        .register(
          'exchange_rate',
          async () => {
            ran.push('rate');
            await charged;
            await settle();
            dying.kill('inside exchange_rate');
          },
          { idempotent: true },
        );
      await expect(
        runToolLoop(model, registry, HELLO, {
          runId: 'crash-tool',
          checkpoints: dying,
          checkpointKey: KEY,
        }),
      ).rejects.toBeInstanceOf(SimulatedCrash);
      await settle();
      expect(ran).toEqual(['charge:90', 'rate']);

      const r = await recoverToolLoop(model, tickets(), 'crash-tool', {
        checkpoints: second,
        checkpointKey: KEY,
      });
      expect(r.status).toBe('done');
      // charge_card replayed its stored result (the same idempotency key), exchange_rate ran again.
      expect(ran).toEqual(['charge:90', 'rate', 'rate']);
      expect(server.requests).toHaveLength(2);
      const results = toolResults(server.requests[1]!);
      expect(results.c).toMatch(/^charged 90 \(.{8}\)$/);
      expect(results.r).toBe('1.25');
    });

    it('a crash inside a non-idempotent tool: RecoveryNeedsDecision, nothing runs; rerunInDoubt finishes', async () => {
      const { first, second } = backend.open();
      const dying = new CrashingStore(first);
      server.script(
        callTools([
          { name: 'charge_card', arguments: { amount: 90 }, id: 'c' },
        ]),
        summarize,
      );
      await expect(
        runToolLoop(
          model,
          tickets({ inCharge: () => dying.kill('inside charge_card') }),
          HELLO,
          { runId: 'in-doubt', checkpoints: dying, checkpointKey: KEY },
        ),
      ).rejects.toBeInstanceOf(SimulatedCrash);
      await settle();

      const err = await recoverToolLoop(model, tickets(), 'in-doubt', {
        checkpoints: second,
        checkpointKey: KEY,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RecoveryNeedsDecision);
      expect((err as RecoveryNeedsDecision).calls.map(([t]) => t)).toEqual([
        'charge_card',
      ]);
      expect(ran).toEqual(['charge:90']);
      expect(server.requests).toHaveLength(1);
      expect((await second.latest('in-doubt'))?.step).toBe(1); // nothing was written

      const r = await recoverToolLoop(model, tickets(), 'in-doubt', {
        checkpoints: second,
        checkpointKey: KEY,
        rerunInDoubt: true,
      });
      expect(r.status).toBe('done');
      expect(ran).toEqual(['charge:90', 'charge:90']);
    });

    it('maxSteps counts the model calls of the whole run, recoveries included', async () => {
      const { first, second } = backend.open();
      const again = () =>
        callTools([{ name: 'exchange_rate', arguments: {}, id: 'r' }]);
      server.script(again(), again(), again(), again());
      // Crash once the second reply is saved (steps: 0 start, 1 reply, 2 results, 3 reply).
      await expect(
        runToolLoop(model, tickets(), HELLO, {
          runId: 'max',
          maxSteps: 2,
          checkpoints: new CrashingStore(first, afterStep(3)),
          checkpointKey: KEY,
        }),
      ).rejects.toBeInstanceOf(SimulatedCrash);
      await settle();
      expect(server.requests).toHaveLength(2);

      const r = await recoverToolLoop(model, tickets(), 'max', {
        checkpoints: second,
        checkpointKey: KEY,
      });
      expect(server.requests).toHaveLength(2); // no third call
      expect(r).toMatchObject({
        status: 'failed',
        modelCalls: 2,
        maxSteps: 2,
        error: { name: 'MaxStepsExceeded', node: 'model' },
      });
      expect(r.error?.message).toMatch(/maxSteps/);
      // The history keeps the last reply's results: a new run can go on from it.
      expect(r.messages[r.messages.length - 1]).toMatchObject({
        role: 'tool',
        toolCallId: 'r',
        content: '1.25',
      });
      expect(ran).toEqual(['rate', 'rate']);
    });
  });

  describe('approvals', () => {
    const withRefund = () =>
      tickets().register(
        'refund',
        (a: { amount: number }) => {
          ran.push(`refund:${a.amount}`);
          return `refunded ${a.amount}`;
        },
        { approval: true },
      );

    it('a loop paused for an approval resumes through runToolLoop with the same runId', async () => {
      const store = new MemoryCheckpointStore();
      const options = { checkpoints: store, checkpointKey: KEY };
      server.script(
        callTools([
          {
            name: 'hold_seats',
            arguments: { show: 'Hamlet', seats: 1 },
            id: 'h',
          },
          { name: 'refund', arguments: { amount: 40 }, id: 'rf' },
        ]),
        summarize,
      );
      const paused = await runToolLoop(model, withRefund(), HELLO, {
        ...options,
        runId: 'appr',
      });
      expect(paused).toMatchObject({
        status: 'paused',
        pending: { tool: 'refund', args: { amount: 40 }, toolCallId: 'rf' },
      });
      expect(ran).toEqual(['hold:1']);

      // Asked again without a decision: still paused, nothing runs, the model is not asked.
      const still = await runToolLoop(model, withRefund(), HELLO, {
        ...options,
        runId: 'appr',
      });
      expect(still.status).toBe('paused');
      expect(server.requests).toHaveLength(1);

      const done = await runToolLoop(model, withRefund(), HELLO, {
        ...options,
        runId: 'appr',
        decision: { approved: true, by: 'alice' },
      });
      expect(done.status).toBe('done');
      expect(ran).toEqual(['hold:1', 'refund:40']); // hold_seats replayed, refund ran once
      expect(toolResults(server.requests[1]!)).toEqual({
        h: '{"held":1,"show":"Hamlet"}',
        rf: 'refunded 40',
      });

      // A retry of the same request returns the finished run; nothing runs again.
      const retry = await runToolLoop(model, withRefund(), [], {
        ...options,
        runId: 'appr',
      });
      expect(retry).toEqual(done);
      expect(server.requests).toHaveLength(2);
      // Another conversation under the same run id is refused.
      await expect(
        runToolLoop(
          model,
          withRefund(),
          [{ role: 'user', content: 'something else' }],
          { ...options, runId: 'appr' },
        ),
      ).rejects.toBeInstanceOf(CheckpointConflict);
      // A decision for a run that is not paused is refused.
      await expect(
        runToolLoop(model, withRefund(), HELLO, {
          ...options,
          runId: 'appr',
          decision: { approved: true },
        }),
      ).rejects.toBeInstanceOf(CheckpointConflict);
    });

    it('a denied call becomes an error result the model reads', async () => {
      server.script(
        callTools([{ name: 'refund', arguments: { amount: 40 }, id: 'rf' }]),
        summarize,
      );
      const store = new MemoryCheckpointStore();
      await runToolLoop(model, withRefund(), HELLO, {
        runId: 'deny',
        checkpoints: store,
      });
      const r = await runToolLoop(model, withRefund(), HELLO, {
        runId: 'deny',
        checkpoints: store,
        decision: { approved: false, by: 'bob', reason: 'over the limit' },
      });
      expect(r.status).toBe('done');
      expect(ran).toEqual([]);
      expect(r.messages.find((m) => m.role === 'tool')).toMatchObject({
        isError: true,
        content: expect.stringMatching(
          /"refund" was denied by bob: over the limit/,
        ) as string,
      });
    });
  });

  it('ToolLoop.recoverAll recovers every unfinished run of its loop (a worker on startup)', async () => {
    const store = new MemoryCheckpointStore();
    server.handler = (request) =>
      request.body.messages.some((m) => m.role === 'tool')
        ? summarize(request)
        : callTools([{ name: 'exchange_rate', arguments: {}, id: 'r' }]);
    for (const runId of ['s1', 's2']) {
      const dying = new CrashingStore(store, afterStep(1));
      await expect(
        new ToolLoop(model, tickets(), {
          name: 'support',
          checkpoints: dying,
          checkpointKey: KEY,
        }).run(HELLO, { runId }),
      ).rejects.toBeInstanceOf(SimulatedCrash);
    }
    await settle();
    // Another loop's name lists none of them.
    const other = new ToolLoop(model, tickets(), {
      name: 'sales',
      checkpoints: store,
      checkpointKey: KEY,
    });
    expect((await other.recoverAll({ force: true })).size).toBe(0);

    const loop = new ToolLoop(model, tickets(), {
      name: 'support',
      checkpoints: store,
      checkpointKey: KEY,
    });
    const out = await loop.recoverAll({ force: true });
    expect([...out.keys()].sort()).toEqual(['s1', 's2']);
    for (const r of out.values()) {
      expect(r).toMatchObject({ status: 'done', modelCalls: 2 });
    }
    expect(server.requests).toHaveLength(4); // one reply each before the crash, one after
    expect(ran).toEqual(['rate', 'rate']);
    expect((await loop.get('s1')).reply?.content).toBe('results: {"r":"1.25"}');
  });

  it('tamper detection is the flow engine’s: a changed checkpoint is CheckpointStoreCorrupt, nothing runs', async () => {
    class Tamperable extends MemoryCheckpointStore {
      editLatest(runId: string, fn: (sealed: string) => string) {
        const cps = this.runs.get(runId)!.checkpoints;
        const last = cps[cps.length - 1]!;
        last.sealed = fn(last.sealed);
      }
    }
    const store = new Tamperable();
    server.script(
      callTools([{ name: 'charge_card', arguments: { amount: 90 }, id: 'c' }]),
      summarize,
    );
    await expect(
      runToolLoop(model, tickets(), HELLO, {
        runId: 'tamper',
        checkpoints: new CrashingStore(store, afterStep(1)),
        checkpointKey: KEY,
      }),
    ).rejects.toBeInstanceOf(SimulatedCrash);
    await settle();
    store.editLatest('tamper', (s) => {
      expect(s).toContain('"amount":90');
      return s.replace('"amount":90', '"amount":9000');
    });
    await expect(
      recoverToolLoop(model, tickets(), 'tamper', {
        checkpoints: store,
        checkpointKey: KEY,
      }),
    ).rejects.toBeInstanceOf(CheckpointStoreCorrupt);
    expect(ran).toEqual([]);
    expect(server.requests).toHaveLength(1);
  });

  it('a model error fails the run with a clear error; invalid options are refused before anything is stored', async () => {
    server.script({ status: 400, json: { error: { message: 'bad model' } } });
    const store = new MemoryCheckpointStore();
    const r = await runToolLoop(model, tickets(), HELLO, {
      runId: 'err',
      checkpoints: store,
    });
    expect(r).toMatchObject({
      status: 'failed',
      error: { name: 'ChatModelError', node: 'model' },
    });
    expect(r.error?.message).toMatch(/400.*bad model/);

    await expect(
      runToolLoop(model, tickets(), HELLO, { runId: 'x', maxSteps: 0 }),
    ).rejects.toThrow(/maxSteps/);
    await expect(
      runToolLoop(model, tickets(), [{ role: 'robot', content: 'x' } as never]),
    ).rejects.toThrow(/role/);
    await expect(
      runToolLoop(model, tickets(), [], { checkpoints: store }),
    ).rejects.toThrow(/at least one message/);
  });
});
