/**
 * The crash fuzzer's random flows, tools and kill plans, shared by the harness (fuzz.ts, which also
 * runs each flow once without crashes for the expected outcome) and the worker processes
 * (worker.ts, modes fuzz-run, fuzz-recover and fuzz-resume). Everything here is a pure function of
 * a trial's seed: a worker rebuilds the same flow (same graph digest) from `--fuzz <seed>`.
 *
 * A flow: 2–7 nodes n0…; each node but the last goes on by edges (the next node, sometimes one
 * more: parallel branches) or by a route (the next node, maybe a later one, maybe an earlier one —
 * a loop — maybe END; picked from the state, sometimes two at once). Every node adds to `n` (a
 * sum reducer, so parallel nodes may both write it) and to `log` (a concatenating reducer) and
 * writes its own `v_<node>`. Routes take the forward target once `n` reaches a cap, so every loop
 * ends; a node's `maxVisits` is sometimes low enough to end a run `failed` (FlowError). A node makes
 * 0–3 tool calls, in one or two groups whose calls run concurrently; two nodes in three are
 * `callsFirst` (their superstep's first `started` record goes out with the previous checkpoint).
 *
 * Tools: idempotent, readOnly, plain (not idempotent) and approval (pauses the run; not
 * idempotent). Results are a function of the arguments, so a rerun gives what the first run gave;
 * some tools fail for some arguments (a node catches that, or the run ends `failed`). The
 * arguments name the call (`node`, `superstep`, `index`), so the ledger says which call ran.
 */
import {
  END,
  Flow,
  ToolRegistry,
  idempotencyKey,
  type CallRecord,
  type CheckpointRecord,
  type PendingApproval,
} from 'agent-adapter';

// ------------------------------------------------------------------------------------------------
// A seeded PRNG (mulberry32) and a string hash (FNV-1a), for specs and for deterministic choices.

export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 0x9e3779b9;
  }
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** 0 … n-1 */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  bool(p = 0.5): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
}

export function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

// ------------------------------------------------------------------------------------------------
// Specs

export type ToolKind =
  'idempotent' | 'readOnly' | 'plain' | 'approval' | 'deadline';

export interface ToolSpec {
  name: string;
  kind: ToolKind;
  /** Fails for about one argument in four. */
  fails: boolean;
  /** Kind `deadline`: an approval the clock decides `timeoutMs` after the pause (nobody else does). */
  deadline?: { timeoutMs: number; onTimeout: 'deny' | 'approve' | 'fail' };
}

export interface CallSpec {
  tool: string;
  /** The node turns the call's failure (or denial) into a value instead of failing the run. */
  catches: boolean;
}

export interface NodeSpec {
  name: string;
  /** Groups run one after the other; the calls of a group run concurrently. */
  groups: CallSpec[][];
  maxVisits?: number;
  /** Outgoing edges (forward only). */
  edges: string[];
  /** A route: targets (may include END and an earlier node); `multi`: may pick two. */
  route?: { targets: string[]; multi: boolean };
  end: boolean;
  /** Sleeps this long (`ctx.sleep`) after its first group of calls (before any, with none). */
  sleepMs?: number;
}

export interface FuzzSpec {
  seed: number;
  flow: string;
  tools: ToolSpec[];
  nodes: NodeSpec[];
  /** Routes go forward only once `n` reaches this. */
  cap: number;
}

/** `timed`: always the durable-time variant (else about a third of the seeds are). */
export function generate(seed: number, timed = false): FuzzSpec {
  const rng = new Rng(seed);
  const kinds: ToolKind[] = ['idempotent', 'readOnly', 'plain', 'approval'];
  const tools: ToolSpec[] = Array.from({ length: 2 + rng.int(4) }, (_, i) => ({
    name: `t${i}`,
    kind: i < kinds.length && rng.bool(0.7) ? kinds[i]! : rng.pick(kinds),
    fails: rng.bool(0.25),
  }));
  const count = 2 + rng.int(6);
  const names = Array.from({ length: count }, (_, i) => `n${i}`);
  const nodes: NodeSpec[] = names.map((name, i) => {
    const calls = rng.pick([0, 1, 1, 2, 2, 3]);
    const list: CallSpec[] = Array.from({ length: calls }, () => ({
      tool: rng.pick(tools).name,
      catches: rng.bool(0.7),
    }));
    const split =
      list.length > 1 && rng.bool(0.5)
        ? 1 + rng.int(list.length - 1)
        : list.length;
    const groups = [list.slice(0, split), list.slice(split)].filter(
      (g) => g.length,
    );
    const node: NodeSpec = { name, groups, edges: [], end: false };
    if (rng.bool(0.15)) node.maxVisits = 1 + rng.int(3);
    if (i === count - 1) {
      node.end = true;
    } else if (rng.bool(0.5)) {
      node.edges.push(names[i + 1]!);
      if (i + 2 < count && rng.bool(0.4))
        node.edges.push(names[i + 2 + rng.int(count - i - 2)]!);
    } else {
      const targets = [names[i + 1]!];
      if (i + 2 < count && rng.bool(0.4))
        targets.push(names[i + 2 + rng.int(count - i - 2)]!);
      if (rng.bool(0.5)) targets.push(names[rng.int(i + 1)]!); // a loop back
      if (rng.bool(0.3)) targets.push(END);
      node.route = { targets: [...new Set(targets)], multi: rng.bool(0.3) };
    }
    return node;
  });
  const spec = {
    seed,
    flow: `fuzz-${seed}`,
    tools,
    nodes,
    cap: 4 + rng.int(10),
  };
  return withTime(spec, timed);
}

/**
 * The durable-time variant, for about a third of the seeds (a stream of its own: the other seeds'
 * flows, kill plans and decisions stay what they were): a node sleeps 15-45 ms, and mostly one
 * tool becomes an approval with a 15-45 ms deadline that only the clock decides (deny, approve
 * or fail), so kills land around the sleep checkpoint, the wake claim and the clock's decision.
 */
function withTime(spec: FuzzSpec, always: boolean): FuzzSpec {
  const rng = new Rng(hash(`time/${spec.seed}`));
  if (!rng.bool(0.35) && !always) return spec;
  const sleeper = spec.nodes[rng.int(spec.nodes.length)]!;
  sleeper.sleepMs = 15 + rng.int(31);
  if (rng.bool(0.75)) {
    const tool = spec.tools[rng.int(spec.tools.length)]!;
    tool.kind = 'deadline';
    tool.deadline = {
      timeoutMs: 15 + rng.int(31),
      onTimeout: rng.pick(['deny', 'approve', 'fail'] as const),
    };
  }
  return spec;
}

/** Whether a seed's flow is the durable-time variant (a sleep, maybe a deadline). */
export function isTimed(spec: FuzzSpec): boolean {
  return spec.nodes.some((n) => n.sleepMs !== undefined);
}

/** A message with its ISO times taken out (the clock's decisions name a deadline: a time of day). */
export function timeless(message: string): string {
  return message.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>');
}

// ------------------------------------------------------------------------------------------------
// The flow

export interface FuzzState {
  n: number;
  log: string[];
  [key: string]: unknown;
}

/** What a tool call's arguments are: who makes it, and the state it was made from. */
export interface CallArgs {
  node: string;
  superstep: number;
  index: number;
  x: number;
}

export function fuzzFlow(spec: FuzzSpec): Flow<FuzzState> {
  const flow = new Flow<FuzzState>(spec.flow, { maxVisits: 8 })
    .reducer('n', (a, b) => (a ?? 0) + b)
    .reducer('log', (a, b) => [...(a ?? []), ...b]);
  for (const node of spec.nodes) {
    flow.node(
      node.name,
      async (s, ctx) => {
        let index = 0;
        const results: string[] = [];
        const nap = async () => {
          // A sleep takes a call index, as a call does: the calls after it keep the library's.
          index++;
          await ctx.sleep(node.sleepMs!);
        };
        if (node.sleepMs !== undefined && !node.groups.length) await nap();
        for (const [g, group] of node.groups.entries()) {
          if (g === 1 && node.sleepMs !== undefined) await nap();
          const settled = await Promise.all(
            group.map((call) => {
              const args: CallArgs = {
                node: node.name,
                superstep: ctx.superstep,
                index: index++,
                x: s.n,
              };
              return ctx.call<string>(call.tool, args).then(
                (r) => r,
                (e: unknown) => {
                  const name = (e as Error)?.name;
                  if (
                    call.catches &&
                    (name === 'ToolFailed' || name === 'ToolDenied')
                  )
                    return `${name}:${timeless((e as Error).message)}`;
                  throw e;
                },
              );
            }),
          );
          results.push(...settled);
          if (g === 0 && node.groups.length === 1 && node.sleepMs !== undefined)
            await nap();
        }
        return {
          n: 1 + results.length,
          log: [`${node.name}@${ctx.superstep}`],
          [`v_${node.name}`]: results,
        };
      },
      {
        ...(node.maxVisits !== undefined && { maxVisits: node.maxVisits }),
        // Its code only makes calls: most nodes say so, and their supersteps then write the
        // previous checkpoint with their first `started` record (a hash, so the seeds' other
        // choices stay as they were).
        callsFirst: hash(`${spec.flow}/${node.name}`) % 3 !== 0,
      },
    );
    for (const to of node.edges) flow.edge(node.name, to);
    if (node.route) {
      const targets = node.route.targets;
      const forward = targets[0]!;
      const multi = node.route.multi;
      flow.route(
        node.name,
        (s) => {
          if (s.n >= spec.cap) return forward;
          const h = hash(`${node.name}:${s.n}`);
          const first = targets[h % targets.length]!;
          if (!multi) return first;
          const second = targets[(h >>> 8) % targets.length]!;
          return [...new Set([first, second])];
        },
        targets,
      );
    }
    if (node.end) flow.end(node.name);
  }
  return flow;
}

// ------------------------------------------------------------------------------------------------
// Tools

/** A tool's side effect, as the harness sees it (the ledger line). */
export interface Effect {
  tool: string;
  key: string;
  args: CallArgs;
  phase: 'begin' | 'end';
}

export interface ToolHooks {
  /** Appends to the ledger (durably) — the side effect. */
  effect(e: Effect): void;
  /** After the `begin` (side effect done, nothing returned yet) and the `end` (about to return). */
  after?(phase: 'begin' | 'end'): void;
}

export function isIdempotent(kind: ToolKind): boolean {
  return kind === 'idempotent' || kind === 'readOnly';
}

export function resultOf(tool: ToolSpec, args: CallArgs): string {
  return `${tool.name}(${args.node},${args.x})#${hash(JSON.stringify([tool.name, args])) % 1000}`;
}

export function fuzzRegistry(spec: FuzzSpec, hooks: ToolHooks): ToolRegistry {
  const registry = new ToolRegistry();
  const tick = () => new Promise((r) => setImmediate(r));
  for (const tool of spec.tools) {
    registry.register(
      tool.name,
      async (args: CallArgs) => {
        const key = idempotencyKey();
        await tick();
        hooks.effect({ tool: tool.name, key, args, phase: 'begin' });
        hooks.after?.('begin');
        await tick();
        hooks.effect({ tool: tool.name, key, args, phase: 'end' });
        hooks.after?.('end');
        if (tool.fails && hash(JSON.stringify(args)) % 4 === 0)
          throw new Error(`${tool.name} refused x=${args.x}`);
        return resultOf(tool, args);
      },
      {
        ...(tool.kind === 'idempotent' && { idempotent: true }),
        ...(tool.kind === 'readOnly' && { readOnly: true }),
        ...(tool.kind === 'approval' && { approval: true }),
        ...(tool.deadline && { approval: tool.deadline }),
      },
    );
  }
  return registry;
}

/** The operator's decision for a paused call: the same in the reference run and after crashes. */
export function decisionFor(
  spec: FuzzSpec,
  pending: Pick<PendingApproval, 'node' | 'index' | 'tool' | 'args'>,
): { approved: boolean; by: string; reason?: string } {
  const approved =
    hash(
      JSON.stringify([spec.seed, pending.node, pending.index, pending.args]),
    ) %
      4 !==
    0;
  return approved
    ? { approved, by: 'operator' }
    : { approved, by: 'operator', reason: 'fuzz says no' };
}

// ------------------------------------------------------------------------------------------------
// Kill plans: where a worker dies. A process worker SIGKILLs itself there; the in-process memory
// cluster simulates it (CrashingStore).

/** The named points of the protocol a worker can be killed at. */
export const POINTS = [
  'start:before',
  'start:after',
  'started:before',
  'started:after',
  'done:before',
  'done:after',
  'superstep:before',
  'superstep:after',
  'pause:before',
  'pause:after',
  'claim:before',
  'claim:after',
  'resume:before',
  'resume:after',
  'tool:begin',
  'tool:end',
] as const;
/**
 * The durable-time points (time variants only): before/after the checkpoint that puts the run to
 * sleep, the wake claim, and the clock's decision (a timed-out `resume`, or the `deadline` fail).
 */
export const TIME_POINTS = [
  'sleep:before',
  'sleep:after',
  'wake:before',
  'wake:after',
  'clock:before',
  'clock:after',
] as const;
export type Point = (typeof POINTS)[number] | (typeof TIME_POINTS)[number];

export type KillPlan =
  /** Before or after the n-th store write. */
  | { kind: 'write'; n: number; moment: 'before' | 'after' }
  /** In the n-th tool call, after its `begin` or its `end` ledger line. */
  | { kind: 'tool'; n: number; where: 'begin' | 'end' }
  /** `ms` after the work begins, wherever it is (a store write may be in flight). */
  | { kind: 'timer'; ms: number }
  /** At the n-th occurrence of a named point. */
  | { kind: 'point'; point: Point; n: number };

/** A sealed record's body, read without verifying it (test inspection only). */
export function bodyOf(sealed: string): Record<string, unknown> {
  return JSON.parse(sealed.split('.').slice(3).join('.')) as Record<
    string,
    unknown
  >;
}

/** The named point kinds a store write is: a checkpoint's reason, or the phases of call records. */
export function writeKinds(
  write:
    | {
        kind: 'save';
        checkpoint: CheckpointRecord;
        calls: readonly CallRecord[];
      }
    | { kind: 'recordCall'; calls: readonly CallRecord[] },
): string[] {
  if (write.kind === 'save') {
    const body = bodyOf(write.checkpoint.sealed);
    const reason = String(body.reason);
    const timedOut =
      reason === 'resume' &&
      Array.isArray(body.decisions) &&
      (body.decisions as Array<{ timedOut?: boolean }>).some((d) => d.timedOut);
    return reason === 'deadline' || timedOut ? [reason, 'clock'] : [reason];
  }
  const phases = new Set(
    write.calls.map((c) => String(bodyOf(c.sealed).phase)),
  );
  return phases.has('started')
    ? ['started']
    : phases.has('done')
      ? ['done']
      : [];
}

/** Counts the events a worker goes through and says when its plan wants it dead. */
export class KillSwitch {
  private writes = 0;
  private tools = 0;
  private readonly seen = new Map<string, number>();
  constructor(readonly plan: KillPlan | undefined) {}

  /** At a store write (`moment`), of `kinds` (writeKinds). Counted on `before`. */
  atWrite(kinds: string[], moment: 'before' | 'after'): boolean {
    const plan = this.plan;
    if (moment === 'before') {
      this.writes++;
      for (const k of kinds) this.seen.set(k, (this.seen.get(k) ?? 0) + 1);
    }
    if (!plan) return false;
    if (plan.kind === 'write')
      return plan.n === this.writes && plan.moment === moment;
    if (plan.kind === 'point') {
      const [what, when] = plan.point.split(':');
      return (
        when === moment &&
        kinds.includes(what!) &&
        this.seen.get(what!) === plan.n
      );
    }
    return false;
  }

  /** In a tool, after its begin or end line. Counted on `begin`. */
  atTool(where: 'begin' | 'end'): boolean {
    if (where === 'begin') this.tools++;
    const plan = this.plan;
    if (!plan) return false;
    if (plan.kind === 'tool')
      return plan.n === this.tools && plan.where === where;
    if (plan.kind === 'point')
      return plan.point === `tool:${where}` && this.tools === plan.n;
    return false;
  }
}
