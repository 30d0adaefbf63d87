/** `DurableModule.forRoot({ encryptionKey })`: run data is encrypted at rest in a real SQLite file. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { CheckpointKeyError } from 'agent-adapter';
import { DurableModule, FlowRunner } from 'agent-adapter/nest';
import {
  KEY,
  Ledger,
  TicketsFlow,
  TicketsModule,
} from './fixtures/tickets.fixtures';
import { Apps } from './utils';

const ENCRYPTION_KEY = 'an-encryption-key-for-the-nest-test!';

describe('DurableModule encryptionKey (e2e, SQLite file)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aa-nest-enc-'));
  const apps = new Apps();
  afterEach(() => apps.closeAll());
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('stores no state, argument or result in clear; a worker without the key gets a clear error', async () => {
    const path = join(dir, 'runs.db');
    const app = await apps.boot([
      DurableModule.forRoot({
        store: { type: 'sqlite', path },
        key: KEY,
        encryptionKey: ENCRYPTION_KEY,
      }),
      TicketsModule.with(new Ledger()),
    ]);
    const r = await app
      .get(FlowRunner)
      .start(
        TicketsFlow,
        { show: 'Rosencrantz-and-Guildenstern', seats: 2 },
        { runId: 'enc-order' },
      );
    expect(r).toMatchObject({
      status: 'done',
      state: { note: 'sent Rosencrantz-and-Guildenstern' },
    });
    await expect(app.get(FlowRunner).get('enc-order')).resolves.toMatchObject({
      status: 'done',
    });
    await apps.closeAll();

    const db = new Database(path, { readonly: true });
    const rows = JSON.stringify([
      // A checkpoint row keeps the call records saved with it (`calls`), the calls table the rest.
      ...db.prepare('SELECT sealed, calls FROM aa_checkpoints').all(),
      ...db.prepare('SELECT sealed FROM aa_calls').all(),
    ]);
    db.close();
    expect(rows).toContain('aa-enc1.');
    expect(rows).not.toContain('Rosencrantz');

    const withoutKey = await apps.boot([
      DurableModule.forRoot({ store: { type: 'sqlite', path }, key: KEY }),
      TicketsModule.with(new Ledger()),
    ]);
    await expect(
      withoutKey.get(FlowRunner).get('enc-order'),
    ).rejects.toBeInstanceOf(CheckpointKeyError);
  });
});
