/**
 * Issue 21's "Done when" for AI SDK models: a tool loop whose model is an AI SDK provider's
 * (AiSdkChatModel over @ai-sdk/openai-compatible) talking over HTTP to a chat-completions server
 * in this process, run by worker processes (worker.ts, loop modes with CHAT_CLIENT=ai-sdk) on a
 * shared store, SIGKILLed after the model's reply was pinned and before the tool results were
 * stored. Another process recovers. The server's request list says how often the model was asked;
 * the ledger file (fsync'd by the tools) says what ran, in which process.
 *
 * SQLite (a file) and Postgres; Redis with `npm run crash` (CRASH_FULL=1).
 */
import {
  AiSdkChatModel,
  DurableError,
  RecoveryNeedsDecision,
  ToolLoop,
  ToolRegistry,
} from 'agent-adapter';
import { KEY } from 'agent-adapter/testing/fixtures';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatServer, callTools, say, toolResults } from '../utils/chat-server';
import { killAll } from '../utils/child-process';
import { describeWithService } from '../utils/services';
import { keysOf, sandboxes, trail, type Sandbox } from './harness';
import { openStore, serviceOf, type StoreKind } from './stores';

const KINDS: StoreKind[] =
  process.env.CRASH_FULL === '1'
    ? ['sqlite', 'postgres', 'redis']
    : ['sqlite', 'postgres'];

const SUMMARY = 'results: {"h":"held 2","c":"charged 90"}';

const done = (modelCalls: number) => ({
  status: 'done',
  runId: expect.any(String) as string,
  step: expect.any(Number) as number,
  note: SUMMARY,
  modelCalls,
});

function suite(kind: StoreKind): void {
  const boxes = sandboxes(kind, 'crash_ai');
  let server: ChatServer;
  beforeEach(async () => {
    server = await ChatServer.start();
    // The model asks for hold_seats (idempotent) and charge_card at once, then sums up.
    server.script(
      callTools([
        { name: 'hold_seats', arguments: { seats: 2 }, id: 'h' },
        { name: 'charge_card', arguments: { amount: 90 }, id: 'c' },
      ]),
      (request) => say(`results: ${JSON.stringify(toolResults(request))}`),
    );
  });
  afterEach(() => server.close());
  afterAll(async () => {
    await killAll();
    await boxes.cleanup();
  });

  const ai = () => ({ CHAT_URL: server.baseUrl, CHAT_CLIENT: 'ai-sdk' });

  /** The model was asked once for the first turn (the user's message only) and, when `answered`, once with both results. */
  function askedOnce(answered: boolean): void {
    // Asked through the AI SDK provider, not OpenAIChatModel.
    for (const r of server.requests)
      expect(r.headers['user-agent']).toMatch(/^ai-sdk-openai-compatible\//);
    const first = server.requests[0]!.body.messages;
    expect(first.map((m) => m.role)).toEqual(['user']);
    if (!answered) return expect(server.requests).toHaveLength(1);
    expect(server.requests).toHaveLength(2);
    expect(toolResults(server.requests[1]!)).toEqual({
      h: 'held 2',
      c: 'charged 90',
    });
  }

  /**
   * A recovery here (another process than the killed worker) that must stop before running
   * anything: the tools throw if run, and the AI SDK model points at a port nobody listens on.
   */
  async function recoverHere(t: Sandbox) {
    const never = (name: string) => () => {
      throw new Error(`${name} ran during a recovery that must stop first`);
    };
    const opened = await openStore(kind, t.env);
    const registry = new ToolRegistry()
      .register('hold_seats', never('hold_seats'), { idempotent: true })
      .register('charge_card', never('charge_card'));
    const model = new AiSdkChatModel(
      createOpenAICompatible({
        name: 'nowhere',
        baseURL: 'http://127.0.0.1:9/v1',
      }).chatModel('test-model'),
      { maxRetries: 0 },
    );
    const loop = new ToolLoop(model, registry, {
      checkpoints: opened.store,
      checkpointKey: KEY,
      name: 'support',
    });
    try {
      const error = await loop.recover(t.runId).catch((e: unknown) => e);
      if (!(error instanceof DurableError)) throw error;
      return error;
    } finally {
      loop.close();
      await opened.close();
    }
  }

  it('killed inside charge_card after hold_seats finished: recovery does not ask the model again; charge_card (not idempotent) is in doubt, rerunInDoubt runs it once more, hold_seats replays', async () => {
    const t = boxes.fresh();
    const w1 = t.start(['loop-run', '--run-id', t.runId], {
      ...ai(),
      HANG_IN: 'charge_card',
      READY_AFTER: 'hold_seats:done',
    });
    await w1.waitForLine(/^READY charge_card$/);
    expect((await w1.kill()).signal).toBe('SIGKILL');
    askedOnce(false);
    const crashed = t.ledger();

    const stopped = await recoverHere(t);
    expect(stopped).toBeInstanceOf(RecoveryNeedsDecision);
    expect((stopped as RecoveryNeedsDecision).calls).toEqual([
      ['charge_card', 'started, no result recorded'],
    ]);
    expect(t.ledger()).toEqual(crashed); // nothing ran
    askedOnce(false); // and the model was not asked

    const w3 = await t
      .start(['loop-recover', '--run-id', t.runId, '--rerun-in-doubt'], ai())
      .report();
    expect(w3.outcome).toEqual(done(2));
    askedOnce(true);
    const names = { [w1.pid]: 'w1', [w3.pid]: 'w3' };
    const ledger = t.ledger();
    expect(trail(ledger, 'hold_seats', names)).toEqual(['begin:w1', 'end:w1']);
    expect(trail(ledger, 'charge_card', names)).toEqual([
      'begin:w1',
      'begin:w3',
      'end:w3',
    ]);
    expect(keysOf(ledger, 'charge_card').size).toBe(1); // the same idempotency key
  });

  it('killed inside hold_seats (idempotent) after charge_card finished: recovery runs hold_seats once more, replays charge_card, asks the model only for its answer', async () => {
    const t = boxes.fresh();
    const w1 = t.start(['loop-run', '--run-id', t.runId], {
      ...ai(),
      HANG_IN: 'hold_seats',
      READY_AFTER: 'charge_card:done',
    });
    await w1.waitForLine(/^READY hold_seats$/);
    expect((await w1.kill()).signal).toBe('SIGKILL');
    askedOnce(false);

    const w2 = await t
      .start(['loop-recover', '--run-id', t.runId], ai())
      .report();
    expect(w2.outcome).toEqual(done(2));
    askedOnce(true);
    const names = { [w1.pid]: 'w1', [w2.pid]: 'w2' };
    const ledger = t.ledger();
    expect(trail(ledger, 'charge_card', names)).toEqual(['begin:w1', 'end:w1']);
    expect(trail(ledger, 'hold_seats', names)).toEqual([
      'begin:w1',
      'begin:w2',
      'end:w2',
    ]);
    expect(keysOf(ledger, 'hold_seats').size).toBe(1);
  });

  it('killed right after the reply was pinned, before any tool ran: recovery runs each tool call once without asking the model again', async () => {
    const t = boxes.fresh();
    const w1 = t.start(['loop-run', '--run-id', t.runId], {
      ...ai(),
      HANG_AFTER_SAVE: 'step=1',
    });
    await w1.waitForLine(/^SAVED step=1$/);
    expect((await w1.kill()).signal).toBe('SIGKILL');
    expect(t.ledger()).toEqual([]);
    askedOnce(false);

    const w2 = await t
      .start(['loop-recover', '--run-id', t.runId], ai())
      .report();
    expect(w2.outcome).toEqual(done(2));
    askedOnce(true);
    const names = { [w2.pid]: 'w2' };
    for (const tool of ['hold_seats', 'charge_card'])
      expect(trail(t.ledger(), tool, names)).toEqual(['begin:w2', 'end:w2']);
  });
}

for (const kind of KINDS) {
  const title = `SIGKILL: a tool loop with an AI SDK model (${kind})`;
  const service = serviceOf(kind);
  if (service) describeWithService(service, title, () => suite(kind));
  else describe(title, () => suite(kind));
}
