import type { RunStatus } from '../exec/checkpoints/checkpoint-store';
import {
  hasActiveSpan,
  spanEvent,
  type SpanAttributes,
} from '../observability/tracing';
import type { CallIdentity } from '../exec/durable/records';
import type { RecordedDecision } from '../flow/flow.interfaces';
import { Messages } from '../errors/messages';
import { consoleLogger } from '../observability/logger';

/** @publicApi */
export interface CheckpointSavedEvent {
  kind: 'flow' | 'loop';
  runId: string;
  step: number;
  status: RunStatus;
  /** The flow's name (for a tool loop: the loop's `name`). */
  flow?: string;
  /**
   * Tool loops (`kind: 'loop'`): what was saved. `'model'` a reply (its tool calls pinned),
   * `'tools'` the tool results (or a pause for an approval), else `'start'`, `'claim'` or `'resume'`.
   */
  stage?: string;
  /** Calls that had finished before a crash but ran again because their arguments changed. */
  unreplayed?: CallIdentity[];
}

/** @publicApi */
export interface RunRecoveredEvent {
  kind: 'flow' | 'loop';
  runId: string;
  flow?: string;
  /** The step of the first checkpoint saved after the recovery's claim. */
  step: number;
  /** Finished calls whose stored outcome was replayed. */
  replayed: CallIdentity[];
  /** Calls in doubt that ran again (idempotent tools, or `rerunInDoubt`). */
  rerun: CallIdentity[];
}

/**
 * A decision was stored (sealed into the run by compare-and-set, before it is spent): an approval
 * or denial (`resume`), a rerun of calls in doubt (`recover` with `rerunInDoubt`), an operator's
 * cancel. @publicApi
 */
export interface RunDecidedEvent {
  kind: 'flow' | 'loop';
  runId: string;
  flow?: string;
  /** The step of the checkpoint that holds the decision. */
  step: number;
  decision: RecordedDecision;
}

/** Event name → payload. @publicApi */
export interface DurableEventMap {
  'checkpoint.saved': CheckpointSavedEvent;
  'run.recovered': RunRecoveredEvent;
  'run.decided': RunDecidedEvent;
}

export type DurableEventName = keyof DurableEventMap;
export type DurableListener<K extends DurableEventName> = (
  event: DurableEventMap[K],
) => void;

/**
 * A small typed event bus. Listeners run synchronously after the write they report; a listener
 * that throws is reported to `onListenerError` (by default the console's `error`; the runner's own
 * events go to its `logger`) and never affects the run.
 * @publicApi
 */
export class DurableEvents {
  private readonly listeners = new Map<
    DurableEventName,
    Set<DurableListener<never>>
  >();

  constructor(
    private readonly onListenerError: (
      error: unknown,
      event: DurableEventName,
    ) => void = (error, event) =>
      consoleLogger.error(Messages.listenerThrew(event), error),
  ) {}

  /**
   * Whether an `emit` of `event` would reach anyone (a listener, or an active span for its span
   * event): an emitter on a hot path builds the event only then.
   */
  wanted(event: DurableEventName): boolean {
    return (this.listeners.get(event)?.size ?? 0) > 0 || hasActiveSpan();
  }

  /** Subscribes; returns the function that unsubscribes. */
  on<K extends DurableEventName>(
    event: K,
    listener: DurableListener<K>,
  ): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  emit<K extends DurableEventName>(event: K, data: DurableEventMap[K]): void {
    spanEvent(event, () => spanAttributes(data));
    const listeners = this.listeners.get(event);
    if (listeners === undefined) return;
    for (const listener of listeners) {
      try {
        (listener as DurableListener<K>)(data);
      } catch (error) {
        this.onListenerError(error, event);
      }
    }
  }
}

/** An event's identifiers and counts as span attributes (never state or arguments). */
function spanAttributes(
  data: CheckpointSavedEvent | RunRecoveredEvent | RunDecidedEvent,
): SpanAttributes {
  const out: SpanAttributes = {
    'agent_adapter.kind': data.kind,
    'agent_adapter.run_id': data.runId,
    'agent_adapter.step': data.step,
  };
  if (data.flow !== undefined) out['agent_adapter.flow'] = data.flow;
  if ('status' in data) out['agent_adapter.status'] = data.status;
  if ('stage' in data && data.stage !== undefined)
    out['agent_adapter.stage'] = data.stage;
  if ('decision' in data) {
    out['agent_adapter.decision'] = data.decision.kind;
    out['agent_adapter.calls'] = data.decision.calls.length;
  }
  if ('replayed' in data) {
    out['agent_adapter.replayed'] = data.replayed.length;
    out['agent_adapter.rerun'] = data.rerun.length;
  }
  return out;
}
