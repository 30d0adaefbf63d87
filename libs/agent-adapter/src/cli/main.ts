#!/usr/bin/env node
/**
 * The operator CLI: `npx agent-adapter runs <command>` (see `--help` and docs/cli.md).
 * Framework-free: it loads no @nestjs package, and only the driver of the store it opens.
 */
import { runCli } from './program';

// A reader that stops early (`runs list | head`) closes the pipe: that is the end of the output,
// not an error worth a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw error;
  });
}

void runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
}).then((code) => {
  process.exitCode = code;
});
