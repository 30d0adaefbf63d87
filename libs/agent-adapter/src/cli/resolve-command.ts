import type { Command } from 'commander';
import type { Json } from '../exec/durable/canonical-json';
import { storeResolution, type CallFinding } from '../flow/runner/resolve';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';
import { EXIT } from './exit-codes';
import type { CommandContext } from './fork-command';
import { operatorId } from './operations';
import { runIdArg } from './run-id-arg';

interface ResolveFlags {
  call: string;
  ran?: boolean;
  notRun?: boolean;
  result?: string;
  error?: string;
  by?: string;
  reason?: string;
}

/**
 * `runs resolve`: an operator says what one call in doubt really did, found at its system (the
 * provider's dashboard, searched by the call's idempotency key). Stored with a compare-and-set,
 * nothing run: the run's next recovery spends it (a call that ran is replayed, one that did not
 * runs once).
 */
export function resolveCommand(runs: Command, c: CommandContext): void {
  runs
    .command('resolve')
    .description(
      'say what a call in doubt really did: --ran (with --result or --error) or --not-run; the next recovery replays it or runs it once',
    )
    .argument('<id>', 'run id', runIdArg)
    .requiredOption(
      '--call <callId>',
      'the call in doubt, node#index (runs inspect lists them)',
    )
    .option('--ran', 'it ran: its effect happened (the card was charged)')
    .option('--result <json>', 'with --ran: what it returned, as JSON')
    .option(
      '--error <name: message>',
      'with --ran: the error it returned, e.g. "CardDeclined: insufficient funds"',
    )
    .option('--not-run', 'it did not run: recovery runs it once')
    .option(
      '--by <name>',
      'who decided, recorded in the run (default: operator:<user>@<host>)',
    )
    .option('--reason <text>', 'why, recorded in the run')
    .action(async (id: string, o: ResolveFlags, cmd: Command) => {
      const finding = findingOf(o);
      const by = o.by ?? operatorId();
      let stored;
      try {
        stored = await storeResolution(
          { store: c.openStore(cmd), ring: c.key() },
          id,
          {
            calls: [finding],
            by,
            ...(o.reason !== undefined && { reason: o.reason }),
          },
          { owner: by },
        );
      } catch (error) {
        // A finding the run does not fit (no such call in doubt): the operator's to fix.
        if (error instanceof TypeError)
          throw new CliError(error.message, EXIT.usage);
        throw error;
      }
      c.out(
        cmd,
        { runId: id, call: o.call, ran: finding.ran, step: stored.step },
        () => CliMessages.resolved(id, o.call, finding.ran, stored.step),
      );
    });
}

/** The flags as one finding; a contradiction is a usage error before anything is read. */
function findingOf(o: ResolveFlags): CallFinding {
  if (o.ran === o.notRun) throw new CliError(CliMessages.resolveRanOrNot());
  if (o.notRun) {
    if (o.result !== undefined || o.error !== undefined)
      throw new CliError(CliMessages.resolveNotRunWithOutcome());
    return { call: o.call, ran: false };
  }
  if (o.result !== undefined && o.error !== undefined)
    throw new CliError(CliMessages.resolveResultOrError());
  if (o.error !== undefined) {
    const at = o.error.indexOf(':');
    const name = (at < 0 ? 'Error' : o.error.slice(0, at)).trim();
    const message = (at < 0 ? o.error : o.error.slice(at + 1)).trim();
    return {
      call: o.call,
      ran: true,
      error: { name: name || 'Error', message },
    };
  }
  if (o.result === undefined) return { call: o.call, ran: true };
  let result: Json;
  try {
    result = JSON.parse(o.result) as Json;
  } catch (error) {
    throw new CliError(
      CliMessages.resolveResultNotJson((error as Error).message),
    );
  }
  return { call: o.call, ran: true, result };
}
