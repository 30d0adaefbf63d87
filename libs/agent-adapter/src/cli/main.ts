#!/usr/bin/env node
/**
 * The operator CLI: `npx agent-adapter runs <command>` (see `--help` and the README's "Operator
 * CLI"). Framework-free: it loads no @nestjs package, and only the driver of the store it opens.
 */
import { runCli } from './program';

void runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
}).then((code) => {
  process.exitCode = code;
});
