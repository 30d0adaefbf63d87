import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Injectable, Module } from '@nestjs/common';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import {
  AiSdkChatModel,
  SQLiteCheckpointStore,
  type AssistantMessage,
  type ChatModel,
  type ChatRequest,
  type ToolCall,
} from 'agent-adapter';
import {
  DurableModule,
  DurableSetupError,
  RecoveryOrchestrator,
  Tool,
  ToolLoopRunner,
  type DurableToolLoop,
} from 'agent-adapter/nest';
import { IsInt, IsString, Min } from 'class-validator';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import { KEY, TicketsModule, Ledger } from './fixtures/tickets.fixtures';
import { Apps, CaptureLogger } from './utils';
import { ChatServer, callTools, say, toolResults } from '../utils/chat-server';

class LookupArgs {
  @IsString()
  show!: string;

  @IsInt()
  @Min(1)
  seats!: number;
}

/** What the tools really did, shared by the "processes" of one test. */
const effects: string[] = [];
let crashInside: (() => never) | undefined;

@Injectable()
class ShowTools {
  @Tool({
    name: 'seats_free',
    readOnly: true,
    args: LookupArgs,
    description: 'Free seats',
  })
  async free(a: LookupArgs): Promise<string> {
    effects.push(`seats_free ${a.show}`);
    return `${a.seats} free for ${a.show}`;
  }

  @Tool({ name: 'book', description: 'Books seats (not idempotent)' })
  async book(a: { show: string }): Promise<string> {
    effects.push(`book ${a.show}`);
    if (crashInside) {
      // Dies a moment later, once seats_free's `done` record is stored.
      await new Promise((resolve) => setTimeout(resolve, 20));
      crashInside();
    }
    return `booked ${a.show}`;
  }

  @Tool({ name: 'cancel', idempotent: true })
  async cancel(): Promise<string> {
    return 'cancelled';
  }
}

/** A model that books when asked, after checking seats; it records every request it gets. */
class BookingModel implements ChatModel {
  readonly requests: ChatRequest[] = [];
  complete(request: ChatRequest): Promise<AssistantMessage> {
    this.requests.push(request);
    const last = request.messages[request.messages.length - 1];
    if (last?.role === 'user')
      return Promise.resolve({
        role: 'assistant',
        content: '',
        toolCalls: <ToolCall[]>[
          {
            id: 'c1',
            name: 'seats_free',
            arguments: { show: 'Hamlet', seats: 2 },
          },
          { id: 'c2', name: 'book', arguments: { show: 'Hamlet' } },
        ],
      });
    return Promise.resolve({ role: 'assistant', content: 'Booked.' });
  }
}

@Injectable()
class BookingAgent {
  readonly model = new BookingModel();
  readonly loop: DurableToolLoop;
  constructor(loops: ToolLoopRunner) {
    this.loop = loops.define('booking', {
      model: this.model,
      tools: ['seats_free', 'book'],
    });
  }
}

@Module({ providers: [ShowTools, BookingAgent] })
class BookingModule {}

/** Where the AI SDK agent's provider sends its requests (a chat server each test starts). */
let chatUrl = '';

/** The same agent with an AI SDK provider's model, over HTTP. */
@Injectable()
class AiSdkBookingAgent {
  readonly loop: DurableToolLoop;
  constructor(loops: ToolLoopRunner) {
    const provider = createOpenAICompatible({ name: 'box', baseURL: chatUrl });
    this.loop = loops.define('ai-booking', {
      model: new AiSdkChatModel(provider.chatModel('booker'), {
        maxRetries: 0,
      }),
      tools: ['seats_free', 'book'],
    });
  }
}

@Module({ providers: [ShowTools, AiSdkBookingAgent] })
class AiSdkBookingModule {}

describe('ToolLoopRunner (e2e)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-nest-loop-'));
  const apps = new Apps();
  const stores: SQLiteCheckpointStore[] = [];
  afterEach(async () => {
    await apps.closeAll();
    while (stores.length) await stores.pop()!.close();
    effects.length = 0;
    crashInside = undefined;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("shows the model the named @Tool methods with their DTO's JSON schema, and runs a conversation", async () => {
    const app = await apps.boot([
      DurableModule.forRoot({ store: { type: 'memory' } }),
      BookingModule,
    ]);
    const agent = app.get(BookingAgent);
    const r = await agent.loop.run([
      { role: 'user', content: 'Two for Hamlet' },
    ]);
    expect(r).toMatchObject({
      status: 'done',
      reply: { content: 'Booked.' },
      modelCalls: 2,
    });
    expect(effects).toEqual(['seats_free Hamlet', 'book Hamlet']);
    const tools = agent.model.requests[0]!.tools;
    expect(tools.map((t) => t.name)).toEqual(['seats_free', 'book']); // not 'cancel'
    expect(tools[0]).toEqual({
      name: 'seats_free',
      description: 'Free seats',
      parameters: {
        type: 'object',
        properties: {
          show: { type: 'string' },
          seats: { type: 'integer', minimum: 1 },
        },
        required: ['show', 'seats'],
      },
    });
    await expect(agent.loop.get(r.runId)).resolves.toMatchObject({
      status: 'done',
    });
    expect(app.get(ToolLoopRunner).get('booking')).toBe(agent.loop);
  });

  it('recovers a loop cut short inside a tool on bootstrap: the model is not asked again, the finished tool replays', async () => {
    const path = join(dir, 'loop-crash.db');
    const inner = new SQLiteCheckpointStore(path);
    stores.push(inner);
    const crashing = new CrashingStore(inner);
    crashInside = () => crashing.kill('inside book');
    const first = await apps.boot([
      DurableModule.forRoot({ store: crashing, key: KEY, workerId: 'w1' }),
      BookingModule,
    ]);
    const cut = first
      .get(BookingAgent)
      .loop.run([{ role: 'user', content: 'Two for Hamlet' }], {
        runId: 'chat-1',
      });
    await expect(cut).rejects.toThrow(SimulatedCrash);
    await settle();
    await apps.closeAll();
    crashInside = undefined;
    expect(effects).toEqual(['seats_free Hamlet', 'book Hamlet']);

    // The booking is in doubt and not idempotent: the boot sweep asks for a decision.
    const logger = new CaptureLogger();
    const second = await apps.boot(
      [
        DurableModule.forRoot({
          store: { type: 'sqlite', path },
          key: KEY,
          workerId: 'w1',
        }),
        BookingModule,
      ],
      { logger },
    );
    await second.get(RecoveryOrchestrator).waitUntilRecovered();
    const agent = second.get(BookingAgent);
    expect(logger.of('DurableRecovery')).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /Run "chat-1" of flow "booking" needs a decision.*book/,
        ),
        'log: Bootstrap recovery done: 1 unfinished run(s) in 1 tool loop(s): 1 need a decision.',
      ]),
    );
    expect(agent.model.requests).toHaveLength(0);

    // Checked with the box office: the booking did not go through. Rerun it.
    const r = await agent.loop.recover('chat-1', { rerunInDoubt: true });
    expect(r).toMatchObject({ status: 'done', reply: { content: 'Booked.' } });
    // The saved reply's tool calls were not asked of the model again (one request: the final one);
    // seats_free (finished) replayed; book ran again because someone decided so.
    expect(agent.model.requests).toHaveLength(1);
    expect(effects).toEqual([
      'seats_free Hamlet',
      'book Hamlet',
      'book Hamlet',
    ]);
  });

  it('takes an AI SDK model (AiSdkChatModel over @ai-sdk/openai-compatible): the @Tool schemas go out as function tools, the conversation runs over HTTP', async () => {
    const server = await ChatServer.start();
    try {
      chatUrl = server.baseUrl;
      server.script(
        callTools([
          {
            name: 'seats_free',
            arguments: { show: 'Hamlet', seats: 2 },
            id: 'f',
          },
          { name: 'book', arguments: { show: 'Hamlet' }, id: 'b' },
        ]),
        (request) => say(`Done: ${JSON.stringify(toolResults(request))}`),
      );
      const app = await apps.boot([
        DurableModule.forRoot({ store: { type: 'memory' } }),
        AiSdkBookingModule,
      ]);
      const r = await app
        .get(AiSdkBookingAgent)
        .loop.run([{ role: 'user', content: 'Two for Hamlet' }]);
      expect(r).toMatchObject({
        status: 'done',
        modelCalls: 2,
        reply: {
          content: 'Done: {"f":"2 free for Hamlet","b":"booked Hamlet"}',
          finishReason: 'stop',
        },
      });
      expect(effects).toEqual(['seats_free Hamlet', 'book Hamlet']);
      expect(server.requests).toHaveLength(2);
      const tools = server.requests[0]!.body.tools!;
      expect(tools.map((t) => t.function.name)).toEqual(['seats_free', 'book']);
      expect(tools[0]!.function.parameters).toEqual({
        type: 'object',
        properties: {
          show: { type: 'string' },
          seats: { type: 'integer', minimum: 1 },
        },
        required: ['show', 'seats'],
      });
    } finally {
      await server.close();
    }
  });

  it('refuses misuse at definition or first use, naming the loop', async () => {
    const app = await apps.boot([
      DurableModule.forRoot({ store: { type: 'memory' } }),
      TicketsModule.with(new Ledger()),
      BookingModule,
    ]);
    const loops = app.get(ToolLoopRunner);
    const model = new BookingModel();
    expect(() => loops.define('booking', { model })).toThrow(
      new DurableSetupError(
        'Tool loop "booking" is defined twice: loop names must be unique (they are stored in every checkpoint).',
      ),
    );
    expect(() => loops.define('x', { model: {} as ChatModel })).toThrow(
      /"model" must be a ChatModel/,
    );
    expect(() => loops.define('', { model })).toThrow(/non-empty string/);
    const unknownTool = loops.define('typo', { model, tools: ['seats_fre'] });
    await expect(
      unknownTool.run([{ role: 'user', content: 'hi' }]),
    ).rejects.toThrow(/Tool loop "typo": Tool "seats_fre" is not registered/);
    const clash = loops.define('tickets', { model });
    await expect(clash.run([{ role: 'user', content: 'hi' }])).rejects.toThrow(
      /has the name of a @Flow/,
    );
  });
});
