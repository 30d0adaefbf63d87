import type {
  AssistantMessage,
  ChatModel,
  ChatRequest,
  ToolMessage,
} from 'agent-adapter';

/**
 * A model that needs no server, for trying the support agent: it looks up an order when the
 * customer names one, refunds it when they ask for a refund, and words the tool's answer. A pure
 * function of the history, so a recovery that asks it again gets the same reply. Set
 * `OPENAI_BASE_URL` to talk to a real model instead.
 */
export class ScriptedSupportModel implements ChatModel {
  complete({ messages }: ChatRequest): Promise<AssistantMessage> {
    const last = messages[messages.length - 1];
    if (last?.role === 'tool') return Promise.resolve(this.word(last));
    const text = last?.role === 'user' ? last.content : '';
    const orderId = /\b([0-9a-f]{32})\b/i.exec(text)?.[1];
    if (!orderId) {
      return Promise.resolve({
        role: 'assistant',
        content:
          'I can look up an order or refund it: tell me its order id (the runId POST /orders gave you).',
      });
    }
    const tool = /refund/i.test(text) ? 'refund_order' : 'order_status';
    return Promise.resolve({
      role: 'assistant',
      content: '',
      toolCalls: [
        { id: `call_${messages.length}`, name: tool, arguments: { orderId } },
      ],
    });
  }

  private word(result: ToolMessage): AssistantMessage {
    const content = result.isError
      ? `Sorry, that did not work: ${result.content}`
      : result.name === 'refund_order'
        ? `Done: ${result.content}.`
        : `Here is your order: ${result.content}.`;
    return { role: 'assistant', content };
  }
}
