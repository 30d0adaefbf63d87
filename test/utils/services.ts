/**
 * Real Postgres and Redis for e2e suites, chosen by environment (DATABASE_URL, REDIS_URL) with local
 * defaults. When a server is unreachable a suite skips with a loud line, unless CI or
 * REQUIRE_SERVICES is set: then it fails with the reason, so CI can never pass by skipping.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

export const DATABASE_URL =
  process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

const required = Boolean(process.env.CI || process.env.REQUIRE_SERVICES);

/** A short random suffix for schema names, key prefixes and files of one suite. */
export function suiteId(prefix: string): string {
  return `${prefix}_${randomBytes(4).toString('hex')}`;
}

/**
 * `describe` when the service answers; otherwise a skipped `describe` with a loud warning, or, under
 * CI/REQUIRE_SERVICES, a failing test that names the server and the reason.
 */
export function describeWithService(
  service: 'postgres' | 'redis',
  title: string,
  body: () => void,
): void {
  const url = service === 'postgres' ? DATABASE_URL : REDIS_URL;
  const why = unreachable(service);
  if (why === undefined) {
    describe(title, body);
    return;
  }
  const message = `${service} at ${url} is unreachable (${why})`;
  if (required) {
    describe(title, () => {
      it(`needs ${service}`, () => {
        throw new Error(
          `${message}; CI/REQUIRE_SERVICES is set, so this suite must run. Start the server or set ${service === 'postgres' ? 'DATABASE_URL' : 'REDIS_URL'}.`,
        );
      });
    });
  } else {
    console.warn(
      `\n!!! SKIPPING "${title}": ${message}. Set CI=true or REQUIRE_SERVICES=1 to make this a failure.\n`,
    );
    describe.skip(title, body);
  }
}

/**
 * Whether the service answered (checked once per test file, as describeWithService checks it),
 * for a suite that starts work for a describeWithService block before that block runs.
 */
export function serviceReachable(service: 'postgres' | 'redis'): boolean {
  return unreachable(service) === undefined;
}

const checked = new Map<string, string | undefined>();

/** Why the service is unreachable, or undefined when it answers. */
function unreachable(service: 'postgres' | 'redis'): string | undefined {
  const url = service === 'postgres' ? DATABASE_URL : REDIS_URL;
  if (!checked.has(url)) {
    // jest collects describes synchronously, so reachability is checked in a blocking child.
    checked.set(url, checkSync(url, service === 'postgres' ? 5432 : 6379));
  }
  return checked.get(url);
}

function checkSync(url: string, port: number): string | undefined {
  const script = `
    const { Socket } = require('node:net');
    const u = new URL(${JSON.stringify(url)});
    const s = new Socket();
    const out = (w) => { process.stdout.write(w || ''); s.destroy(); process.exit(0); };
    s.setTimeout(2000, () => out('timed out'));
    s.once('error', (e) => out(e.message));
    s.connect(Number(u.port || ${port}), u.hostname, () => out(''));`;
  const result = execFileSync(process.execPath, ['-e', script], {
    encoding: 'utf8',
  });
  return result === '' ? undefined : result;
}
