import { Inject, Injectable } from '@nestjs/common';
import {
  OpenAIChatModel,
  type ChatModel,
  type ToolLoopResult,
} from 'agent-adapter';
import { ToolLoopRunner, type DurableToolLoop } from 'agent-adapter/nest';
import { EXAMPLE_CONFIG, type ExampleConfig } from '../config';
import { ScriptedSupportModel } from './scripted.model';

const SYSTEM =
  'You are the support agent of a ticket shop. Use the tools to look up or refund orders; answer in one or two sentences.';

/**
 * The support agent: a durable tool loop whose model may call `order_status` and `refund_order`.
 * Its conversations are checkpointed like flows and recovered on bootstrap.
 */
@Injectable()
export class SupportAgent {
  readonly loop: DurableToolLoop;

  constructor(
    loops: ToolLoopRunner,
    @Inject(EXAMPLE_CONFIG) config: ExampleConfig,
  ) {
    const model: ChatModel = config.openai
      ? new OpenAIChatModel(config.openai)
      : new ScriptedSupportModel();
    // Streaming: each reply and tool result is published as it is saved (GET /support/:id/stream).
    this.loop = loops.define('support', {
      model,
      tools: ['order_status', 'refund_order'],
      stream: true,
    });
  }

  /** `wait: false`: answers once the conversation is stored; it goes on here in the background. */
  ask(
    message: string,
    options: { wait?: boolean } = {},
  ): Promise<ToolLoopResult> {
    return this.loop.run(
      [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: message },
      ],
      { maxSteps: 6, ...(options.wait === false && { wait: false }) },
    );
  }
}
