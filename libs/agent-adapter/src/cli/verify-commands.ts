import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { CheckpointNotFound } from '../errors';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';
import { EXIT } from './exit-codes';
import type { CommandContext } from './fork-command';
import { readJson } from './args';
import { runIdArg } from './run-id-arg';
import { exportRun, verifyBundle } from './audit-bundle';
import { listAll, listAllHeadless } from '../exec/checkpoints/list-all';
import { verifyRun, type RunVerification } from './verify';

/** `runs verify` and `runs export`: every seal checked, and a run's rows as a signed bundle. */
export function verifyCommands(runs: Command, c: CommandContext): void {
  runs
    .command('verify')
    .description(
      'check every signature and sequence of a run (or of all runs, or of an exported bundle); exit 1 on any problem',
    )
    .argument('[id]', 'run id', runIdArg)
    .option('--all', 'every run in the store')
    .option('--bundle <file>', 'an exported bundle, checked offline (no store)')
    .action(
      async (
        id: string | undefined,
        o: { all?: boolean; bundle?: string },
        cmd: Command,
      ) => {
        const given = [
          id !== undefined,
          o.all === true,
          o.bundle !== undefined,
        ];
        if (given.filter(Boolean).length !== 1) {
          throw new CliError(CliMessages.verifyOneOf());
        }
        let results: RunVerification[];
        let signed: boolean | undefined;
        if (o.bundle !== undefined) {
          const parsed = await readJson(o.bundle);
          let checked: ReturnType<typeof verifyBundle>;
          try {
            checked = verifyBundle(c.key(), parsed);
          } catch (error) {
            if (!(error instanceof TypeError)) throw error;
            throw new CliError(
              CliMessages.bundleInvalid(o.bundle, error.message),
              EXIT.problems,
            );
          }
          signed = checked.signed;
          results = [checked];
        } else if (id !== undefined) {
          const checked = await verifyRun(c.openStore(cmd), c.key(), id);
          if (!checked) throw new CheckpointNotFound(id);
          results = [checked];
        } else {
          results = [];
          const s = c.openStore(cmd);
          for await (const head of listAll(s, { limit: 100 })) {
            const checked = await verifyRun(s, c.key(), head.runId);
            if (checked) results.push(checked);
          }
          // Runs no head lists: their head was deleted below the store.
          for await (const runId of listAllHeadless(s)) {
            const checked = await verifyRun(s, c.key(), runId);
            if (checked) results.push(checked);
          }
        }
        const bad = results.filter((r) => r.problems.length > 0);
        if (bad.length) c.problemsFound();
        c.out(
          cmd,
          {
            ok: bad.length === 0,
            ...(signed !== undefined && { signed }),
            runs: results,
          },
          () => {
            let text = '';
            for (const r of results) {
              text += `${r.problems.length ? 'CORRUPT' : 'ok'}  ${r.runId}  (${r.checkpoints} checkpoints, ${r.calls} call records)\n`;
              for (const p of r.problems)
                text += `  - ${p.where}: ${p.detail}\n`;
            }
            if (signed !== undefined)
              text += `bundle signature: ${signed ? 'ok' : 'INVALID'}\n`;
            text += `${results.length} run(s) checked, ${bad.length} with problems.\n`;
            return text;
          },
        );
      },
    );

  runs
    .command('export')
    .description(
      'write a self-contained, signed audit bundle of a run (check it with runs verify --bundle)',
    )
    .argument('<id>', 'run id', runIdArg)
    .option('--out <file>', 'write to this file (default: stdout)')
    .action(async (id: string, o: { out?: string }, cmd: Command) => {
      const bundle = await exportRun(c.openStore(cmd), c.key(), id);
      if (!bundle) throw new CheckpointNotFound(id);
      const text = `${JSON.stringify(bundle, null, 2)}\n`;
      if (o.out === undefined) {
        c.print(text);
        return;
      }
      await writeFile(o.out, text, { mode: 0o600 });
      c.out(
        cmd,
        {
          file: o.out,
          runId: id,
          checkpoints: bundle.checkpoints.length,
          calls: bundle.calls.length,
        },
        () =>
          `Wrote ${o.out}: run ${id}, ${bundle.checkpoints.length} checkpoints, ${bundle.calls.length} call records, signed.\n`,
      );
    });
}
