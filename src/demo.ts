/**
 * `npm run demo`: the crash story in a terminal, with two real worker processes of the example
 * app on one SQLite file.
 *
 *   1. worker-a takes an order and is killed (SIGKILL) inside email_tickets, after the card was
 *      charged and while the mail is being sent;
 *   2. worker-b boots, waits for worker-a's lease to expire, and recovers the order at bootstrap:
 *      the charge replays from the store, the mail (idempotent by its key) runs again and the
 *      provider sends it once;
 *   3. the ledger of what really happened: one charge, one mail.
 *
 * `npm run demo -- charge_card` kills worker-a inside the (non-idempotent) charge instead, after the
 * provider charged the card: worker-b then refuses to guess and logs that the order needs a
 * decision. `npm run demo -- charge_card --before` kills it inside the charge before the provider
 * was called: the same decision, but no charge at the provider. The demo prints what the operator
 * does in either case.
 */
import { mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEVELOPMENT_KEY } from './config';
import { WorkerProcess } from './worker-process';

const crashIn = process.argv[2] ?? 'email_tickets';
// --before: die inside the tool before it acts (CRASH_BEFORE), not after (CRASH_IN).
const before = process.argv.includes('--before');
const dataDir = resolve(process.env.DATA_DIR ?? join('data', 'demo'));
// The app's own development key unless one is set, so `DATA_DIR=data/demo npm start` (and the
// operator CLI with the same key) can read what the demo left.
const KEY = process.env.CHECKPOINT_KEY ?? DEVELOPMENT_KEY;

const say = (text: string) => console.log(`\n\x1b[1m${text}\x1b[0m`);
const show =
  (name: string) =>
  (line: string): void => {
    // The worker's own log, minus Nest's start-up chatter.
    if (!/InstanceLoader|RouterExplorer|RoutesResolver|NestFactory/.test(line))
      console.log(
        `  [${name}] ${line.replace(/^\[Nest\] \d+\s+-\s+\S+, \S+ \S+\s+/, '')}`,
      );
  };

function worker(name: string, env: Record<string, string> = {}) {
  return WorkerProcess.start(
    name,
    {
      DATA_DIR: dataDir,
      CHECKPOINT_KEY: KEY,
      WORKER_ID: name,
      LEASE_MS: '3000',
      ...env,
    },
    { echo: show(name) },
  );
}

async function main(): Promise<void> {
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });

  say(
    `1. worker-a starts; it will die inside ${crashIn}, ${before ? 'before' : 'after'} it acts.`,
  );
  const a = worker('worker-a', {
    [before ? 'CRASH_BEFORE' : 'CRASH_IN']: crashIn,
  });
  const urlA = await a.url();
  say(`POST ${urlA}/orders {"show":"Hamlet","seats":2}`);
  const answer = await fetch(`${urlA}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ show: 'Hamlet', seats: 2 }),
  }).then(
    (r) => `HTTP ${r.status}`,
    (error: unknown) => `no answer (${(error as Error).message})`,
  );
  const exit = await a.exited;
  console.log(
    `  → ${answer}; worker-a exited by ${exit.signal ?? `code ${exit.code}`}`,
  );

  say(
    '2. worker-b boots on the same SQLite file and recovers what worker-a left.',
  );
  const b = worker('worker-b');
  const urlB = await b.url();
  await b.waitFor(
    /recovered: |needs a decision|could not be recovered/,
    60_000,
  );
  const { runs } = (await (await fetch(`${urlB}/orders`)).json()) as {
    runs: Array<{ runId: string }>;
  };
  for (const { runId } of runs) {
    const run = await (await fetch(`${urlB}/orders/${runId}`)).json();
    say(`GET /orders/${runId}`);
    console.log(`  ${JSON.stringify(run)}`);
  }

  say(`3. What really happened (${join(dataDir, 'ledger.log')}):`);
  const ledger = readFileSync(join(dataDir, 'ledger.log'), 'utf8')
    .trim()
    .split('\n');
  for (const line of ledger) console.log(`  ${line}`);
  // The payment provider's own ledger: one charge per idempotency key.
  const charges = readdirSync(join(dataDir, 'payments'));
  const mails = readdirSync(join(dataDir, 'outbox')).length;
  say(
    `The provider holds ${charges.length} charge(s); ${mails} mail(s) went out.`,
  );
  for (const file of charges)
    console.log(
      `  ${join(dataDir, 'payments', file)}: ${readFileSync(join(dataDir, 'payments', file), 'utf8').trim()}`,
    );
  if (crashIn === 'charge_card') {
    const store = `--store sqlite:${dataDir}/runs.db`;
    console.log(
      `  The charge was in doubt, so nothing ran again. Search the provider by the call's idempotency\n` +
        `  key (GET /orders/<id> shows it; the provider keeps ${join(dataDir, 'payments')}/<key>.json), then say\n` +
        `  what the call did (worker-b is stopped now: DATA_DIR=${dataDir} npm start, or the CLI):\n` +
        `  charged:     npx agent-adapter runs resolve <id> --call pay#0 --ran --result '"<charge id>"' --by <you> --reason <why> ${store}\n` +
        `  not charged: npx agent-adapter runs resolve <id> --call pay#0 --not-run --by <you> --reason <why> ${store}\n` +
        `  (with CHECKPOINT_KEY=${KEY === DEVELOPMENT_KEY ? DEVELOPMENT_KEY : '<the key>'}; or POST /orders/<id>/resolve, or the run viewer at /runs)`,
    );
  }
  await b.stop();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
