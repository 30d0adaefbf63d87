/**
 * The call context (call-context.ts): a node's code runs in its node scope, across its awaits; a
 * tool runs in its tool scope and outside its node's, so a decorated tool it calls is a plain call
 * (the Nest layer routes by `currentNodeScope()`); an approval policy and an approval port run
 * outside both, so the tools they call stay plain too.
 */
import {
  Executor,
  Flow,
  FlowRunner,
  MemoryCheckpointStore,
  ToolRegistry,
} from 'agent-adapter';
import { currentNodeScope, currentToolScope } from './call-context';

const KEY = 'use-a-secret-from-your-vault-32b';
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Which scopes the caller sees now: [node name or undefined, tool name or undefined]. */
const scopes = () => [currentNodeScope()?.node, currentToolScope()?.tool];

describe('the call context', () => {
  it('a node sees its own scope, a tool only its own, an approval policy and port neither (before and after an await)', async () => {
    const seen: Record<string, unknown[]> = {};
    const note = (where: string) => (seen[where] = scopes());
    const registry = new ToolRegistry()
      .register('probe', async () => {
        note('tool');
        await tick();
        note('tool after await');
        return 1;
      })
      .register(
        'guarded',
        async () => {
          note('guarded tool');
          return 2;
        },
        {
          approval: () => {
            note('policy');
            return true;
          },
        },
      );
    const flow = new Flow<{ n: number }>('scopes')
      .node('a', async (_s, ctx) => {
        note('node');
        const one = await ctx.call<number>('probe', {});
        note('node after call');
        const two = await ctx.call<number>('guarded', {});
        return { n: one + two };
      })
      .end('a');
    const runner = new FlowRunner(new Executor(registry), {
      checkpoints: new MemoryCheckpointStore(),
      checkpointKey: KEY,
      approvals: {
        decide: async () => {
          note('port');
          await tick();
          note('port after await');
          return { approved: true, by: 'ann' };
        },
      },
    });
    const r = await runner.run(flow, { n: 0 }, { runId: 'c-1' });
    expect(r.status).toBe('done');
    expect(r.state.n).toBe(3);
    expect(seen).toEqual({
      node: ['a', undefined],
      tool: [undefined, 'probe'],
      'tool after await': [undefined, 'probe'],
      'node after call': ['a', undefined],
      policy: [undefined, undefined],
      port: [undefined, undefined],
      'port after await': [undefined, undefined],
      'guarded tool': [undefined, 'guarded'],
    });
    // And none once the run is over.
    expect(scopes()).toEqual([undefined, undefined]);
  });
});
