import { violationsText } from './text';

/** Flow definitions (FlowError, when the flow is built or compiled) and what nodes do at run time. */
export const FlowMessages = {
  flowName: (name: unknown) =>
    `Flow name ${JSON.stringify(name)} is invalid: use 1-128 letters, digits, "_", ".", ":" or "-".`,
  flowMaxVisits: (flow: string, maxVisits: unknown) =>
    `Flow "${flow}": maxVisits must be a positive integer, got ${String(maxVisits)}.`,
  flowKind: (flow: string, kind: unknown) =>
    `Flow "${flow}": kind must be 'flow' or 'loop', got ${JSON.stringify(kind)}.`,
  nodeName: (flow: string, name: unknown) =>
    `Flow "${flow}": node name ${JSON.stringify(name)} is invalid.`,
  nodeTwice: (flow: string, node: string) =>
    `Flow "${flow}": node "${node}" is defined twice.`,
  nodeSpec: (flow: string, node: string) =>
    `Flow "${flow}": node "${node}" must be a function or Call(...).`,
  nodeMaxVisits: (flow: string, node: string) =>
    `Flow "${flow}": node "${node}" maxVisits must be a positive integer.`,
  nodeCallsFirst: (flow: string, node: string) =>
    `Flow "${flow}": node "${node}" callsFirst must be true or false.`,
  routeFunction: (flow: string, from: string) =>
    `Flow "${flow}": route from "${from}" needs a function.`,
  routeTwice: (flow: string, from: string) =>
    `Flow "${flow}": node "${from}" has two routes; use one route returning several targets.`,
  reducerFunction: (flow: string, key: string) =>
    `Flow "${flow}": reducer for "${key}" must be a function.`,
  flowFrozen: (flow: string) =>
    `Flow "${flow}" is already in use (its digest is fixed); build a new Flow to change it.`,
  callTool: () => 'Call(tool): the tool name must be a non-empty string.',
  graphProblem: (flow: string, problem: string) =>
    `Flow "${flow}": ${problem}.`,
  stateNotObject: (flow: string) =>
    `Flow "${flow}": the stored state is not an object.`,
  nodeReturned: (flow: string, node: string, update: unknown) =>
    `Flow "${flow}": node "${node}" returned ${Array.isArray(update) ? 'an array' : typeof update}; a node returns an object of the state keys it changes, or nothing.`,
  bothWrote: (flow: string, earlier: string, node: string, key: string) =>
    `Flow "${flow}": nodes "${earlier}" and "${node}" both wrote "${key}" in one superstep; declare a reducer for "${key}" or write it from one node.`,
  routePicked: (
    flow: string,
    node: string,
    target: unknown,
    targets: readonly string[],
  ) =>
    `Flow "${flow}": the route from "${node}" picked "${String(target)}", which is not one of its declared targets (${targets.join(', ')}).`,
  invalidState: (
    flow: string,
    violations: ReadonlyArray<{ path: string; messages: string[] }>,
  ) =>
    `Invalid state for flow "${flow}": ${violationsText(violations)}. Nothing was stored; fix the input and start again.`,
  invalidToolArguments: (
    tool: string,
    violations: ReadonlyArray<{ path: string; messages: string[] }>,
  ) =>
    `Invalid arguments for tool "${tool}": ${violationsText(violations)}. The tool did not run.`,
  unsealable: (path: string, why: string) =>
    `The value at ${path} cannot be stored durably: ${why}. Use plain JSON data (objects, arrays, strings, finite numbers, booleans, null).`,
  lateCall: (node: string, tool: string) =>
    `Node "${node}" called tool "${tool}" after its superstep ended. Await every ctx.call before the node returns.`,
  unregisteredTool: (node: string, tool: string) =>
    `Node "${node}" called tool "${tool}", which is not registered. Register it on the ToolRegistry the Executor was given.`,
  approvalPolicyAnswer: (tool: string, answer: unknown) =>
    `Tool "${tool}": the approval policy returned ${answer instanceof Promise ? 'a promise' : (JSON.stringify(answer) ?? String(answer))}; it must return true or false, synchronously.`,
  approvalVerdict: (tool: string, problem: string) =>
    `The approval port's answer for "${tool}" is invalid: ${problem}. Answer { approved: true | false, by?, reason?, args? }.`,
  // What approvalVerdict says is wrong with the answer.
  verdictNotObject: () => 'not an object',
  verdictApproved: () => 'approved is not true or false',
  verdictField: (key: string) => `${key} is not a string`,
  // Why a value cannot be stored (put in unsealable).
  unsealableNumber: (value: number) => `${value} is not a finite number`,
  unsealableType: (type: string) => `a ${type} is not JSON`,
  unsealableCycle: () => 'it contains a cycle',
  unsealableHole: () => 'an array hole or undefined item is not JSON',
  unsealableInstance: (name: string) =>
    `a ${name} instance is not plain JSON data`,
  unsealableDepth: (maxDepth: number) =>
    `it is nested more than ${maxDepth} levels deep (arrays and objects); store it flatter, or as a string`,
  // Canonical JSON: only the encoder makes CanonicalText (its text is trusted as already checked).
  canonicalTextMade: () =>
    'CanonicalText is made by the encoder only: encode the value with canonical(value) or canonicalObject(members).',
  sleepDuration: (node: string, got: unknown) =>
    `ctx.sleep in node "${node}": give a duration in ms, a finite number of at least 0 (got ${String(got)}).`,
  sleepUntilTime: (node: string, got: unknown) =>
    `ctx.sleepUntil in node "${node}": give a valid Date or epoch ms (got ${String(got)}).`,
  canonicalMember: (key: string) =>
    `member "${key}" is not a CanonicalText: encode it with canonical(value) first.`,
  publishData: (node: string, why: string) =>
    `Node "${node}" published a stream entry that is not JSON: ${why}`,
  publishAfterSuperstep: (node: string) =>
    `Node "${node}" published a stream entry after its superstep ended. Await every ctx.publish before the node returns.`,
  publishOutsideRun: () =>
    'publish() was called outside a durable run: call it from a node of a flow, or from a tool a node called.',
  streamDropped: (runId: string, from: number, first: number) =>
    `Run "${runId}": stream entries from offset ${from} to ${first - 1} were dropped (the stream keeps the newest entries: streamRetention). Read on from offset ${first}.`,
} as const;
