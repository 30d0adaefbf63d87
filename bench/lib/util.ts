import { randomBytes } from 'node:crypto';

export { DATABASE_URL, REDIS_URL } from '../../test/utils/services';

/** `--name value` from the command line, or the default. */
export function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined
    ? process.argv[i + 1]!
    : fallback;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function suffix(): string {
  return randomBytes(4).toString('hex');
}

/** The key every bench signs with (benches never share runs with anything else). */
export const KEY = 'bench-key-bench-key-bench-key-32b';
