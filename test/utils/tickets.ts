import {
  Call,
  Executor,
  Flow,
  ToolRegistry,
  idempotencyKey,
} from 'agent-adapter';

/** The spec's tickets flow, with tools that append to a ledger of what really ran. */
export class Order {
  show = '';
  seats = 0;
  note = '';
}

export const KEY = 'use-a-secret-from-your-vault-32b';

export interface LedgerEntry {
  tool: string;
  worker: string;
  key: string;
}

export interface TicketTools {
  /** Called at the start of each tool body (after `started` is stored). */
  onTool?: (tool: string) => void | Promise<void>;
}

export function ticketsRegistry(
  ledger: LedgerEntry[],
  worker: string,
  hooks: TicketTools = {},
): ToolRegistry {
  const tool =
    (name: string, result: (a: { show: string; seats?: number }) => string) =>
    async (a: { show: string; seats?: number }) => {
      await hooks.onTool?.(name);
      ledger.push({ tool: name, worker, key: idempotencyKey() });
      return result(a);
    };
  return new ToolRegistry()
    .register(
      'hold_seats',
      tool('hold_seats', (a) => `held ${a.seats} for ${a.show}`),
      { idempotent: true },
    )
    .register(
      'charge_card',
      tool('charge_card', (a) => `charged ${a.seats}`),
    )
    .register(
      'email_tickets',
      tool('email_tickets', (a) => `sent ${a.show}`),
    );
}

export function ticketsFlow(): Flow<Order> {
  const args = (o: Order) => ({ show: o.show, seats: o.seats });
  return new Flow('tickets', { state: Order })
    .node('hold', Call('hold_seats', { args, into: 'note' }))
    .node('pay', Call('charge_card', { args, into: 'note' }))
    .node(
      'send',
      Call('email_tickets', { args: (o) => ({ show: o.show }), into: 'note' }),
    )
    .edge('hold', 'pay')
    .edge('pay', 'send')
    .end('send');
}

export function executorFor(
  ledger: LedgerEntry[],
  worker: string,
  hooks?: TicketTools,
): Executor {
  return new Executor(ticketsRegistry(ledger, worker, hooks));
}

export function count(ledger: LedgerEntry[], tool: string): number {
  return ledger.filter((e) => e.tool === tool).length;
}
