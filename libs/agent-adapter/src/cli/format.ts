import { CliMessages } from './cli.messages';

/** Plain-text tables for people; `--json` output is for machines. */
export function table(headers: string[], rows: string[][]): string {
  if (rows.length === 0) return '';
  const widths = headers.map((h, i) =>
    Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((c, i) =>
        i === cells.length - 1 ? c : c.padEnd(widths[i] ?? c.length),
      )
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

/** An epoch-ms time as ISO-8601 (UTC), or "-". */
export function time(ms: number | undefined): string {
  return ms === undefined || !Number.isFinite(ms)
    ? '-'
    : new Date(ms).toISOString();
}

/** Key: value lines, skipping undefined values. */
export function fields(entries: Array<[string, unknown]>): string {
  const shown = entries.filter(([, v]) => v !== undefined);
  const width = Math.max(...shown.map(([k]) => k.length));
  return (
    shown
      .map(
        ([k, v]) =>
          `${`${k}:`.padEnd(width + 2)}${typeof v === 'string' ? v : JSON.stringify(v)}`,
      )
      .join('\n') + '\n'
  );
}

/**
 * A date for `--finished-before`: ISO-8601 (`2026-01-31`, `2026-01-31T12:00:00Z`) or an age
 * (`30d`, `12h`, `90m`) counted back from `now`.
 */
export function parseBefore(value: string, now = Date.now()): number {
  const age = /^(\d+)([dhm])$/.exec(value.trim());
  if (age) {
    const unit = { d: 86_400_000, h: 3_600_000, m: 60_000 }[
      age[2] as 'd' | 'h' | 'm'
    ];
    return now - Number(age[1]) * unit;
  }
  const ms = Date.parse(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(ms)) {
    throw new Error(CliMessages.notADate(value));
  }
  return ms;
}
