import { readFile } from 'node:fs/promises';
import { InvalidArgumentError } from 'commander';
import { asError } from '../errors';
import { CliError } from './cli.error';
import { CliMessages } from './cli.messages';
import { EXIT } from './exit-codes';

/** Argument parsers and small text helpers shared by the CLI's commands. */

export async function readJson(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(CliMessages.cannotRead(file, asError(error).message));
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new CliError(
      CliMessages.notJson(file, asError(error).message),
      EXIT.problems,
    );
  }
}

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1)
    throw new InvalidArgumentError(CliMessages.positiveInteger());
  return n;
}

export function list(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  ];
}

export function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}
