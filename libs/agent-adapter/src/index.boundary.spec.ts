import { join } from 'node:path';
import {
  loadEntry,
  loadedFrom,
  optionalPeers,
  type LoadedEntry,
} from '../../../test/utils/fresh-node';

/**
 * The core entry must load no store driver and none of the optional peers (the Nest layer,
 * class-validator/-transformer, ...): a plain-Node user of the memory store has none of them
 * installed. Jest keeps its own module registry, so this is checked where it is real: in a fresh
 * `node` that compiles the sources on the fly (test/utils/fresh-node.ts) and then lists
 * `require.cache`.
 */
const ENTRY = join(__dirname, 'index.ts');

/** Never loaded by `import 'agent-adapter'`, whatever else the library adds. */
const DRIVERS = ['pg', 'typeorm', 'ioredis', 'better-sqlite3'];
/** The AI SDK: AiSdkChatModel calls the model object it is given, so nothing of it is loaded. */
const AI_SDK = ['ai', '@ai-sdk/'];
const ALWAYS_BANNED = [
  '@nestjs/',
  'class-validator',
  'class-transformer',
  ...DRIVERS,
  ...AI_SDK,
];

describe('agent-adapter core entry (import boundary)', () => {
  let child: LoadedEntry;

  beforeAll(() => {
    child = loadEntry(ENTRY);
  });

  it('loads the library itself (the check is not vacuous)', () => {
    expect(child.loaded).toContain(ENTRY);
    expect(child.exports).toEqual(
      expect.arrayContaining([
        'Flow',
        'FlowRunner',
        'MemoryCheckpointStore',
        'AiSdkChatModel',
      ]),
    );
  });

  it.each([...new Set([...ALWAYS_BANNED, ...optionalPeers()])])(
    'loads nothing from %s',
    (name) => {
      expect(loadedFrom(child.loaded, name)).toEqual([]);
    },
  );
});
