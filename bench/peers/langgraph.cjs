'use strict';
/**
 * LangGraph.js: a StateGraph of S nodes in a chain (START -> n0 -> ... -> END), each node ONE call
 * of a trivial async function returning a small object, its result in a state key of its own.
 *
 *   node bench/peers/langgraph.cjs <sync|async|exit|memory>
 *
 * sync, async, exit: PostgresSaver (PostgresSaver.fromConnString + setup()) on the database
 * `peers_lg`, invoked with that `durability` ("sync": each checkpoint written before the next
 * step starts, as ours does; "async": written while the next step runs, LangGraph's default;
 * "exit": only when the graph exits). memory: MemorySaver, LangGraph's default durability.
 */
const pg = require('pg');
const {
  Annotation,
  END,
  MemorySaver,
  START,
  StateGraph,
} = require('@langchain/langgraph');
const { PostgresSaver } = require('@langchain/langgraph-checkpoint-postgres');
const lib = require('./lib.cjs');

const step = async (x) => ({ v: x + 1 });

function build(steps, checkpointer) {
  const keys = { x: Annotation() };
  for (let i = 0; i < steps; i++) keys[`r${i}`] = Annotation();
  let graph = new StateGraph(Annotation.Root(keys));
  for (let i = 0; i < steps; i++) {
    const input = i === 0 ? (s) => s.x : (s) => s[`r${i - 1}`].v;
    graph = graph.addNode(`n${i}`, async (s) => ({
      [`r${i}`]: await step(input(s)),
    }));
    graph = graph.addEdge(i === 0 ? START : `n${i - 1}`, `n${i}`);
  }
  return graph.addEdge(`n${steps - 1}`, END).compile({ checkpointer });
}

lib.main(async () => {
  const variant = process.argv[2];
  const durable = variant !== 'memory';
  let saver;
  let counters = [];
  if (durable) {
    saver = PostgresSaver.fromConnString(lib.dbUrl('peers_lg'));
    await saver.setup();
    counters = [
      await new lib.PgCounter(pg, 'peers_lg', () => [saver.pool]).open(),
    ];
  } else {
    saver = new MemorySaver();
  }
  const tag = `${process.pid}-${Date.now().toString(36)}`;
  await lib.runPhases(
    {
      system: 'langgraph',
      store: durable ? 'postgres' : 'memory',
      variant: durable ? `lg-${variant}` : 'lg-memory',
      version: lib.version('@langchain/langgraph'),
    },
    (steps) => {
      const graph = build(steps, saver);
      return async (i) => {
        const config = { configurable: { thread_id: `${tag}-${steps}-${i}` } };
        if (durable) config.durability = variant;
        const r = await graph.invoke({ x: i }, config);
        if (r[`r${steps - 1}`].v !== i + steps)
          throw new Error(`unexpected result ${JSON.stringify(r)}`);
      };
    },
    counters,
  );
  for (const c of counters) await c.close();
  if (durable) await saver.end();
});
