/**
 * The tool loop's events (spec, "Events": `checkpoint.saved` has `kind` `flow` or `loop`, and
 * `flow` or `stage`) and its runner options (a synchronous approval port, a resume policy), with a
 * scripted in-process model. The engine's generic hook is the Flow's `kind` option.
 */
import {
  DurableEvents,
  Executor,
  Flow,
  FlowError,
  FlowRunner,
  MemoryCheckpointStore,
  RunAccessDenied,
  ToolLoop,
  ToolRegistry,
  type ApprovalRequest,
  type CheckpointSavedEvent,
  type RunRecoveredEvent,
} from 'agent-adapter';
import { ScriptedModel, answer, asking } from '../../../../test/utils/specs';

const refundReply = asking({
  id: 'rf',
  name: 'refund',
  arguments: { amount: 40 },
});
const done = answer('refunded');
const USER = [{ role: 'user' as const, content: 'refund me' }];

function refunds(ran: string[]) {
  return new ToolRegistry().register(
    'refund',
    (a: { amount: number }) => {
      ran.push(`refund:${a.amount}`);
      return `refunded ${a.amount}`;
    },
    { approval: true },
  );
}

describe('Flow kind: events of tool loops', () => {
  it("a tool loop's checkpoint.saved events say kind 'loop' and the stage saved: start, model, tools", async () => {
    const events = new DurableEvents();
    const saved: CheckpointSavedEvent[] = [];
    events.on('checkpoint.saved', (e) => saved.push(e));
    const ran: string[] = [];
    const registry = new ToolRegistry().register('rate', () => {
      ran.push('rate');
      return 1.25;
    });
    const model = new ScriptedModel([
      asking({ id: 'r', name: 'rate', arguments: {} }),
      done,
    ]);
    const loop = new ToolLoop(model, registry, { events, name: 'support' });
    const r = await loop.run(USER, { runId: 'ev' });
    expect(r.status).toBe('done');
    expect(saved).toEqual([
      {
        kind: 'loop',
        runId: 'ev',
        flow: 'support',
        step: 0,
        status: 'running',
        stage: 'start',
      },
      {
        kind: 'loop',
        runId: 'ev',
        flow: 'support',
        step: 1,
        status: 'running',
        stage: 'model',
      },
      {
        kind: 'loop',
        runId: 'ev',
        flow: 'support',
        step: 2,
        status: 'running',
        stage: 'tools',
      },
      {
        kind: 'loop',
        runId: 'ev',
        flow: 'support',
        step: 3,
        status: 'done',
        stage: 'model',
      },
    ]);
  });

  it("a paused loop's checkpoint is the 'tools' stage; its resume and a recovery's claim are named so, and run.recovered says kind 'loop'", async () => {
    const store = new MemoryCheckpointStore();
    const events = new DurableEvents();
    const saved: CheckpointSavedEvent[] = [];
    const recovered: RunRecoveredEvent[] = [];
    events.on('checkpoint.saved', (e) => saved.push(e));
    events.on('run.recovered', (e) => recovered.push(e));
    const ran: string[] = [];
    const loop = new ToolLoop(
      new ScriptedModel([refundReply, done]),
      refunds(ran),
      { checkpoints: store, events },
    );
    const paused = await loop.run(USER, { runId: 'p' });
    expect(paused.status).toBe('paused');
    expect(saved.at(-1)).toMatchObject({ status: 'paused', stage: 'tools' });
    await loop.run([], { runId: 'p', decision: { approved: true } });
    expect(saved.slice(3).map((e) => [e.step, e.status, e.stage])).toEqual([
      [3, 'running', 'resume'],
      [4, 'running', 'tools'],
      [5, 'done', 'model'],
    ]);
    expect(ran).toEqual(['refund:40']);
    expect(recovered).toEqual([]); // a resume is not a recovery
  });

  it("a flow's events keep kind 'flow' and carry no stage; a Flow refuses an unknown kind", async () => {
    const events = new DurableEvents();
    const saved: CheckpointSavedEvent[] = [];
    events.on('checkpoint.saved', (e) => saved.push(e));
    const flow = new Flow('plain').node('a', () => ({})).end('a');
    await new FlowRunner(new Executor(new ToolRegistry()), { events }).run(
      flow,
      {},
    );
    expect(saved.map((e) => [e.kind, 'stage' in e])).toEqual([
      ['flow', false],
      ['flow', false],
    ]);
    expect(() => new Flow('x', { kind: 'graph' as never })).toThrow(FlowError);
  });
});

describe('ToolLoop runner options', () => {
  it('approvals: a synchronous ApprovalPort decides inside the call; the loop never pauses', async () => {
    const asked: ApprovalRequest[] = [];
    const ran: string[] = [];
    const model = new ScriptedModel([refundReply, done]);
    const loop = new ToolLoop(model, refunds(ran), {
      approvals: {
        decide: (req) => {
          asked.push(req);
          return { approved: true, by: 'cli' };
        },
      },
    });
    const r = await loop.run(USER, { runId: 'sync' });
    expect(r.status).toBe('done');
    expect(asked.map((a) => [a.flow, a.node, a.tool, a.args])).toEqual([
      ['tool-loop', 'tools', 'refund', { amount: 40 }],
    ]);
    expect(ran).toEqual(['refund:40']);
    expect(model.requests).toHaveLength(2);
  });

  it('canResume: an approver the policy allows resumes a paused loop; without it, RunAccessDenied', async () => {
    const store = new MemoryCheckpointStore();
    const ran: string[] = [];
    const model = new ScriptedModel([refundReply, done]);
    const make = (
      canResume?: (r: { requester: { user?: string } }) => boolean,
    ) =>
      new ToolLoop(model, refunds(ran), {
        checkpoints: store,
        ...(canResume && { canResume }),
      });
    const paused = await make().run(USER, { runId: 'cr', ctx: { user: 'u1' } });
    expect(paused.status).toBe('paused');
    const approver = { user: 'alice' };
    const decision = { approved: true, by: 'alice' };
    await expect(
      make().run([], { runId: 'cr', ctx: approver, decision }),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    // A stranger without a decision, or with messages, learns nothing either.
    const allowing = (r: { requester: { user?: string } }) =>
      r.requester.user === 'alice';
    await expect(
      make(allowing).run([], { runId: 'cr', ctx: approver }),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    await expect(
      make(allowing).run(USER, { runId: 'cr', ctx: approver, decision }),
    ).rejects.toBeInstanceOf(RunAccessDenied);
    expect((await store.head('cr'))?.step).toBe(paused.step); // nothing written
    const r = await make(allowing).run([], {
      runId: 'cr',
      ctx: approver,
      decision,
    });
    expect(r.status).toBe('done');
    expect(ran).toEqual(['refund:40']);
    expect(model.requests).toHaveLength(2);
    // The run kept its own identity.
    await expect(
      make().get('cr', { ctx: { user: 'u1' } }),
    ).resolves.toMatchObject({
      status: 'done',
    });
  });
});
