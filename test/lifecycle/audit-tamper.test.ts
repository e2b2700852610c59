import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { embeddedContext } from '../helpers/context.ts';
import { walkEveryState } from '../helpers/walk.ts';

describe('tamper evidence', () => {
  it('editing any audit row’s data, or a live row the chain vouches for, makes audit verify name that row', async () => {
    const ctx = await embeddedContext();
    const { id } = await walkEveryState(ctx);
    await ctx.items.close();
    const db = new Database(ctx.dbPath);
    const rows = db.prepare('SELECT PK, SK, attrs FROM items WHERE PK = ? AND SK != ?').all(`ART#${id}`, 'HEAD') as Array<{
      PK: string;
      SK: string;
      attrs: string;
    }>;
    const update = db.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?');
    const { SqliteItemStore } = await import('../../src/store/sqlite/sqlite-item-store.ts');
    const reader = Object.assign(ctx, { items: new SqliteItemStore(ctx.dbPath) });
    let edited = 0;
    for (const row of rows) {
      const attrs = JSON.parse(row.attrs) as Record<string, unknown>;
      // Change a value the row is about: its actor, state, digest, or any field it has.
      const field =
        ['actor', 'to', 'content_hash', 'decision', 'state', 'outputs', 'status', 'action', 'digest', 'version'].find((f) => f in attrs) ??
        Object.keys(attrs)[0];
      assert.ok(field, `${row.SK} has a field to edit`);
      const tampered = { ...attrs, [field as string]: field === 'version' ? 99 : { forged: true } };
      update.run(JSON.stringify(tampered), row.PK, row.SK);
      const report = await verifyArtifactAudit(reader, id);
      assert.ok(
        report.findings.some((f) => f.row === `${row.PK} ${row.SK}`),
        `editing ${field} of ${row.SK} must be reported against that row; got ${JSON.stringify(report.findings)}`,
      );
      update.run(row.attrs, row.PK, row.SK);
      edited++;
    }
    assert.ok(edited >= 25, `edited ${edited} rows`);
    assert.deepEqual((await verifyArtifactAudit(reader, id)).findings, [], 'restored rows verify again');
    db.prepare('DELETE FROM items WHERE PK = ? AND SK LIKE ?').run(`ART#${id}`, 'APPROVAL#%');
    const missing = await verifyArtifactAudit(reader, id);
    assert.equal(missing.ok, false, 'a deleted audit row breaks the chain');
    db.close();
  });
});
