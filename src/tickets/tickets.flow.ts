import { appendFileSync } from 'node:fs';
import { Call, Flow, ToolRegistry, idempotencyKey } from 'agent-adapter';
import { Order } from './order.state';

/**
 * The spec's tickets flow. Each tool appends to a ledger file what it really did, so you can see
 * that a recovered run charges the card once. `CRASH_IN=<tool>` kills the process inside that tool.
 */
export function ticketsRegistry(ledger: string): ToolRegistry {
  const act = (tool: string, what: string) => {
    appendFileSync(
      ledger,
      `${new Date().toISOString()} pid=${process.pid} ${tool}: ${what} (key ${idempotencyKey().slice(0, 12)}…)\n`,
    );
    if (process.env.CRASH_IN === tool) {
      console.log(
        `\n💥 CRASH_IN=${tool}: the process dies inside ${tool}, after it acted.\n`,
      );
      process.kill(process.pid, 'SIGKILL');
    }
  };
  return new ToolRegistry()
    .register(
      'hold_seats',
      (a: { show: string; seats: number }) => {
        act('hold_seats', `held ${a.seats} seats for ${a.show}`);
        return `held ${a.seats}`;
      },
      {
        idempotent: true,
        description: 'Hold seats (safe to repeat: holds are keyed)',
      },
    )
    .register('charge_card', (a: { show: string; seats: number }) => {
      // A real payment API takes idempotencyKey() and applies a repeated request once.
      act('charge_card', `charged ${a.seats * 40} EUR`);
      return `charged ${a.seats * 40} EUR`;
    })
    .register('email_tickets', (a: { show: string }) => {
      act('email_tickets', `mailed the tickets for ${a.show}`);
      return 'tickets sent';
    });
}

const args = (o: Order) => ({ show: o.show, seats: o.seats });

export const ticketsFlow = new Flow('tickets', { state: Order })
  .node('hold', Call('hold_seats', { args, into: 'note' }))
  .node('pay', Call('charge_card', { args, into: 'note' }))
  .node(
    'send',
    Call('email_tickets', { args: (o) => ({ show: o.show }), into: 'note' }),
  )
  .edge('hold', 'pay')
  .edge('pay', 'send')
  .end('send');
