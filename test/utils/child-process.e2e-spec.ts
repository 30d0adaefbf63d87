/**
 * The child-process harness every crash suite waits on. Node may emit a child's 'exit' before the
 * last of its output is read: a worker that printed `STARTED` and ended at once (a fast run, a
 * parent busy at that moment) looked as if it never printed it ("exited before printing
 * /^STARTED$/" with empty output, seen once in the SIGKILL suite under CI load).
 */
import { spawn } from 'node:child_process';
import { ChildHarness } from './child-process';

/** A child that prints `lines` and exits with `code` at once. */
function printAndExit(lines: string, code: number): ChildHarness {
  const script = `process.stdout.write(${JSON.stringify(lines)}); process.exit(${code})`;
  return run(script);
}

function run(script: string): ChildHarness {
  const child = spawn(process.execPath, ['-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new ChildHarness(child, { name: 'printer' });
}

describe('ChildHarness', () => {
  it("sees a line that reaches the pipe after the child's exit", async () => {
    // The child exits at once; what it started prints into the same pipe 300 ms later: output
    // read after 'exit', as when this process reads late, deterministically.
    const late = `setTimeout(() => process.stdout.write('STARTED\\n'), 300)`;
    const h = run(
      `require('node:child_process').spawn(process.execPath, ['-e', ${JSON.stringify(late)}], { stdio: ['ignore', 'inherit', 'inherit'] }).unref(); process.exit(0)`,
    );
    await expect(h.waitForLine(/^STARTED$/)).resolves.toBe('STARTED');
    await expect(h.exited).resolves.toEqual({ code: 0, signal: null });
  });

  it('sees a line the child printed just before it exited, while this process was busy', async () => {
    for (let i = 0; i < 3; i++) {
      const h = printAndExit('STARTED\nREPORT {}\n', 0);
      const until = Date.now() + 300;
      while (Date.now() < until); // both the output and the exit wait here, in either order
      await expect(h.waitForLine(/^STARTED$/)).resolves.toBe('STARTED');
      expect(h.lines).toEqual(['STARTED', 'REPORT {}']);
    }
  });

  it('a child that exits without the line: the error says how it exited and what it printed', async () => {
    const h = printAndExit('booting\n', 3);
    await expect(h.waitForLine(/^STARTED$/)).rejects.toThrow(
      /printer \(pid \d+, exited \(code 3\)\) exited before printing \/\^STARTED\$\/\n--- stdout\nbooting\n/,
    );
  });
});
