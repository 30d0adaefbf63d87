import type { CheckpointStore } from '../../index';
import { describeFencedCallLog } from './call-log';
import { describeDueWork } from './due-work';
import type { CheckpointStoreFixture } from './context';
import { resolveFramework, type TestFramework } from './framework';
import { describeListingLeasesDelete } from './listing';
import { describeDurableProtocol } from './protocol';
import { describeQueues } from './queues';
import { describeCompareAndSetSave } from './save';
import { describeRunStreams } from './streams';

export type { CheckpointStoreFixture, RawStoreAccess } from './context';
export type { TestFramework } from './framework';

/**
 * Declares the CheckpointStore conformance suite for one store: compare-and-set saves, the fenced
 * call log, listing, leases, due work, queues, run streams, deletion, namespaces, then the durable protocol (crash recovery,
 * approvals, racing recoverers) run on it, and, with `fixture.raw`, tampered rows. Every store of
 * this library passes it; a store of your own should too.
 *
 * Call it at the top level of a test file. It declares its tests with `describe`, `it` and
 * `afterAll` taken from `framework`, or from the globals jest (and vitest with `globals: true`)
 * provide, and asserts with node:assert, so it works under either and needs neither installed:
 *
 * ```ts
 * import { describeCheckpointStoreConformance } from 'agent-adapter/testing';
 * // vitest without globals: import { describe, it, afterAll } from 'vitest';
 *
 * describeCheckpointStoreConformance({
 *   name: 'my store',
 *   make: async () => new MyStore({ prefix: `t${Date.now()}` }),
 * }); // , { describe, it, afterAll } for vitest without globals
 * ```
 *
 * Each `make()` must return an empty store in a namespace of its own; the suite closes them all
 * after its last test. Tests take a few seconds each against a real database: raise the test
 * timeout (jest's default is 5 s).
 */
export function describeCheckpointStoreConformance(
  fixture: CheckpointStoreFixture,
  framework?: TestFramework,
): void {
  const { describe, it, afterAll } = resolveFramework(framework);
  describe(`CheckpointStore conformance: ${fixture.name}`, () => {
    const opened: CheckpointStore[] = [];
    const make = async () => {
      const store = await fixture.make();
      opened.push(store);
      return store;
    };
    afterAll(async () => {
      await Promise.all(opened.map((s) => s.close()));
    });

    const suite = { describe, it, make };
    describeCompareAndSetSave(suite);
    describeFencedCallLog(suite);
    describeListingLeasesDelete(suite);
    describeDueWork(suite);
    describeQueues(suite);
    describeRunStreams(suite);
    describeDurableProtocol(suite, fixture.raw);
  });
}
