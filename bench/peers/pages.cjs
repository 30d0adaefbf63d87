'use strict';
/**
 * What a flow's commits write to SQLite's WAL, page by page: each page named by the b-tree (table
 * or index) it belongs to, so the pages a save rewrites, and the bytes each commit's sync flushes,
 * can be read apart. On SQLite the sync is most of a save's cost, and it follows those bytes.
 *
 *   npm run bench:pages       # from the repository root; STEPS (3), FLOWS (20), BEFORE (550)
 *
 * bench:peers' flow (ours.cjs) on the packed library's SQLiteCheckpointStore, on a temporary file:
 * BEFORE flows first (so the trees are the size they are in bench:peers' window), then a second
 * connection checkpoints and truncates the WAL, FLOWS more flows run, and the WAL's frames are read
 * back: each frame's page number, mapped to its b-tree by the `dbstat` table. FLOWS stays small so
 * the WAL does not reach its auto-checkpoint (1,000 pages), which would start it over.
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const lib = require('./lib.cjs');
const { makeFlow, runnerOn, flowOnce } = require('./ours.cjs');

const count = (name, fallback) =>
  lib.wholeSetting('bench:pages', name, fallback);
const STEPS = count('STEPS', 3);
const FLOWS = count('FLOWS', 20);
const BEFORE = count('BEFORE', 550);

/** The WAL's frames: page number, and whether the frame ends a commit (its db size is set). */
function frames(wal) {
  const pageSize = wal.readUInt32BE(8);
  const out = [];
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize)
    out.push({
      page: wal.readUInt32BE(at),
      commit: wal.readUInt32BE(at + 4) > 0,
    });
  return { pageSize, frames: out };
}

async function main() {
  const aa = require('agent-adapter');
  const Database = require('better-sqlite3');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'peers-pages-'));
  const file = path.join(dir, 'runs.db');
  const store = new aa.SQLiteCheckpointStore(file);
  try {
    const runner = runnerOn(aa, store);
    const flow = makeFlow(aa, STEPS);
    const before = flowOnce(runner, flow, STEPS, 'before');
    for (let i = 0; i < BEFORE; i++) await before(i);
    const reader = new Database(file);
    reader.pragma('wal_checkpoint(TRUNCATE)');
    const measured = flowOnce(runner, flow, STEPS, 'pages');
    for (let i = 0; i < FLOWS; i++) await measured(i);
    const { pageSize, frames: all } = frames(fs.readFileSync(`${file}-wal`));
    const owner = new Map(
      reader
        .prepare('SELECT name, pageno FROM dbstat')
        .all()
        .map((r) => [r.pageno, r.name]),
    );
    reader.close();
    const commits = all.filter((f) => f.commit).length;
    // Every write is one commit: fewer means the WAL started over and lost the first ones.
    if (commits !== FLOWS * (STEPS + 1))
      throw new Error(
        `${commits} commits in the WAL for ${FLOWS} flows of ${STEPS + 1} writes: lower FLOWS`,
      );
    const byTree = new Map();
    for (const f of all) {
      // A page no tree holds now: one that was freed (or the file grew past) since.
      const tree = owner.get(f.page) ?? '(free)';
      byTree.set(tree, (byTree.get(tree) ?? 0) + 1);
    }
    const perFlow = (n) => (n / FLOWS).toFixed(2);
    console.log(
      `SQLite WAL, ${FLOWS} flows of ${STEPS} steps after ${BEFORE}: page size ${pageSize} B, ` +
        `${perFlow(all.length)} pages a flow, ${(all.length / commits).toFixed(2)} a commit, ` +
        `${Math.round((all.length * (pageSize + 24)) / commits)} B a commit`,
    );
    for (const [tree, n] of [...byTree].sort((a, b) => b[1] - a[1]))
      console.log(`  ${perFlow(n).padStart(6)}  ${tree}`);
  } finally {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
