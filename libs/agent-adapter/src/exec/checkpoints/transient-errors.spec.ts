import { runInNewContext } from 'node:vm';
import { CheckpointStoreUnavailable } from '../../errors';
import { guarded, transientReason } from './transient-errors';

describe('transientReason', () => {
  it("recognises a driver error made in another realm (Node's socket errors inside jest's sandbox)", () => {
    // Found with a real connection reset under pg (test/stores/store-faults.e2e-spec.ts): the
    // error failed `instanceof Error` and the write was not retried.
    const foreign: unknown = runInNewContext(
      `Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' })`,
    );
    expect(foreign instanceof Error).toBe(false);
    expect(transientReason(foreign)).toBe('Error: read ECONNRESET');
  });

  it('an ioredis command timeout is transient (the command may have run: the writer reads back)', () => {
    expect(transientReason(new Error('Command timed out'))).toBe(
      'Error: Command timed out',
    );
  });

  it('leaves alone what may not pass, and what is not an error', () => {
    const unique = Object.assign(new Error('duplicate key'), { code: '23505' });
    expect(transientReason(unique)).toBeUndefined();
    expect(transientReason({ code: 'ECONNRESET' })).toBeUndefined();
    expect(transientReason('ECONNRESET')).toBeUndefined();
    expect(transientReason(null)).toBeUndefined();
  });

  it('guarded turns a foreign transient error into a transient CheckpointStoreUnavailable', async () => {
    const foreign: unknown = runInNewContext(
      `Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })`,
    );
    const error = await guarded('Store', 'r1', () =>
      Promise.reject(foreign as Error),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CheckpointStoreUnavailable);
    expect((error as CheckpointStoreUnavailable).transient).toBe(true);
  });
});
