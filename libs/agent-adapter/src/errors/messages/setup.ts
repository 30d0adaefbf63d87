import { shown } from './text';

/** Runner options, tool registration and call-time arguments (DurableSetupError; TypeError at call time), and what the runner logs. */
export const SetupMessages = {
  /** A message about one option, prefixed with what it configures ("FlowRunner", "DurableModule"). */
  ofOwner: (owner: string, message: string) => `${owner}: ${message}`,
  badInteger: (option: string, min: number, value: unknown) =>
    min === 1
      ? `"${option}" must be a positive integer, got ${shown(value)}.`
      : `"${option}" must be an integer of at least ${min}, got ${shown(value)}.`,
  badApprovals: () =>
    'approvals must be an ApprovalPort: an object with a decide(request) method.',
  badLogger: () =>
    'logger must be a DurableLogger: an object with warn(message, ...meta) and error(message, ...meta) methods.',
  listenerThrew: (event: string) =>
    `agent-adapter: a "${event}" listener threw`,
  savedListenerFailed: () =>
    'agent-adapter: a checkpoint.saved listener failed',
  renewalFailed: (workerId: string) =>
    `agent-adapter: lease renewal failed for worker ${workerId}`,
  badCanResume: () =>
    'canResume must be a function (request) => boolean | Promise<boolean>.',
  ctxField: (key: string) => `ctx.${key} must be a string.`,
  badDecision: () =>
    'resume(flow, runId, decision): decision.approved must be true or false.',
  toolName: (name: unknown) =>
    `Tool name ${JSON.stringify(name)} is invalid: use 1-128 letters, digits, "_", ".", ":" or "-".`,
  toolHandler: (tool: string) =>
    `Tool "${tool}": the handler must be a function.`,
  toolTwice: (tool: string) =>
    `Tool "${tool}" is already registered; tool names must be unique.`,
  toolUnknown: (tool: string, known: readonly string[]) =>
    `Tool "${tool}" is not registered. Registered tools: ${known.join(', ') || '(none)'}.`,
  badCron: (
    schedule: string,
    expression: string,
    timezone: string | undefined,
    why: string,
  ) =>
    `Schedule "${schedule}": the cron expression ${JSON.stringify(expression)}${timezone === undefined ? '' : ` in time zone ${JSON.stringify(timezone)}`} is invalid (${why}). Give 5 fields (minute hour day month weekday), or 6 with seconds first, and an IANA time zone such as "Europe/Berlin".`,
  scheduleOption: (
    schedule: string,
    option: string,
    rule: string,
    got: string,
  ) => `Schedule "${schedule}": ${option} must be ${rule}, got ${got}.`,
  scheduleName: (name: unknown) =>
    `Schedule name ${shown(name)} is invalid: use 1-100 letters, digits, "_", "." or "-".`,
  scheduleTwice: (name: string, flow: string, other: string) =>
    `Schedule "${name}" is declared twice in this process (flows "${flow}" and "${other}"): give each schedule its own name.`,
  toolOption: (tool: string, option: string, rule: string, got: string) =>
    `Tool "${tool}": ${option} must be ${rule}, got ${got}.`,
  invalidRunId: (runId: unknown) =>
    `Run id ${shown(runId)} is invalid: use 1-200 letters, digits, "_", ".", ":", "@" or "-".`,
  badQueueName: (name: unknown) =>
    `Queue name ${shown(name)} is invalid: use 1-128 letters, digits, "_", ".", ":", "@" or "-".`,
  badRateLimit: (queue: string) =>
    `queues.${queue}.rateLimit must be { limit, intervalMs }: at most limit runs started in any window of intervalMs.`,
  badQueueKey: (field: string, value: unknown) =>
    `enqueue: ${field} must be a string of 1-200 characters, got ${shown(value)}.`,
  badEnqueueNumber: (field: string, value: unknown) =>
    field === 'priority'
      ? `enqueue: priority must be an integer between -1000000 and 1000000 (lower starts first), got ${shown(value)}.`
      : `enqueue: ${field} must be a non-negative integer, got ${shown(value)}.`,
  badWorkerId: (workerId: unknown, max: number) =>
    `workerId must be a non-empty string of at most ${max} characters without control characters (it is stored as the owner of every run this worker drives), got ${typeof workerId === 'string' ? `${shown(workerId)} (${[...workerId].length} characters)` : shown(workerId)}.`,
} as const;
