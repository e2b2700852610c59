import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { Conflict, IntegrityError } from '../../src/core/errors.ts';
import { openVersionContent } from '../../src/lifecycle/artifacts.ts';
import { refsOfItem } from '../../src/lifecycle/references.ts';
import { createBackup, listBackups } from '../../src/recovery/backup.ts';
import { MANIFEST_FILE, openBackup } from '../../src/recovery/backup-format.ts';
import { activateRestore, readRestoreProof, reconcile } from '../../src/recovery/reconcile.ts';
import { readRestoreRecord, restoreBackup } from '../../src/recovery/restore.ts';
import { isRestoreHeld, readContentRoot, readEpoch } from '../../src/system/state.ts';
import { collect, tempDir } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { allItems, dirState, embeddedAt, populate, tableLines } from './helpers.ts';

const notRegistry = (i: { PK: string; SK: string }) => i.PK === 'SYS#installation' && i.SK.startsWith('BACKUP#');

async function source() {
  const dir = tempDir('alp-rec');
  const src = await embeddedAt(path.join(dir, 'src'));
  const populated = await populate(src);
  return { dir, src, ...populated };
}

describe('backup → restore → reconcile → activate (embedded)', () => {
  it('a --with-content backup restored into a new directory reconciles VERIFIED and activates; the source is unchanged', async () => {
    const { dir, src, walked } = await source();
    const beforeItems = await tableLines(src.items);
    const beforeContent = dirState(src.contentRoot);
    const out = path.join(dir, 'backup-1');
    const b = await createBackup(src, { out, withContent: true, actor: 'os:tester' });

    // The source: every item and object as it was; only the registry gained the backup.
    assert.deepEqual(await tableLines(src.items, notRegistry), beforeItems);
    assert.deepEqual(dirState(src.contentRoot), beforeContent);
    const [registered] = await listBackups(src);
    assert.equal(registered?.status, 'COMPLETE');
    assert.equal(registered?.location, out);
    assert.equal(registered?.manifest_digest, b.manifest.manifest_digest);

    // The manifest names exactly what the items name, and protects itself and the files.
    const m = b.manifest;
    assert.equal(m.consistency, 'point-in-time');
    assert.equal(m.epoch, 1);
    assert.equal(m.installation_id, (await src.items.get({ PK: 'SYS#installation', SK: 'INSTALLATION' }))?.installation_id);
    const named = new Set((await allItems(src.items)).flatMap((i) => refsOfItem(i).map((r) => r.key)));
    const opened = await openBackup(out, { expectedManifestDigest: m.manifest_digest });
    const listed: string[] = [];
    for await (const o of opened.objects()) listed.push(o.key);
    assert.deepEqual(new Set(listed), named);
    assert.equal(m.items.count, beforeItems.length);
    assert.ok(m.content && m.content.count === listed.filter((k) => !k.startsWith('provenance/')).length);

    const dst = await embeddedAt(path.join(dir, 'restored'));
    const r = await restoreBackup(dst, { from: out, actor: 'os:tester', chunk: 17 });
    assert.equal(r.record.status, 'RESTORED');
    assert.equal(r.record.items_written, m.items.count);
    assert.equal(r.record.installation_id, m.installation_id);
    assert.equal(r.record.content_root_changed, true);
    assert.equal(await isRestoreHeld(dst.items), true);
    const root = await readContentRoot(dst.items);
    assert.equal(root?.location, dst.content.location);
    assert.equal(root?.previous_location, src.content.location);
    assert.equal(root?.changed, true);
    const restoredLines = new Set(await tableLines(dst.items));
    for (const line of beforeItems) assert.ok(restoredLines.has(line), `restored: ${line.slice(0, 80)}`);

    const report = await reconcile(dst, { actor: 'os:tester' });
    assert.equal(report.status, 'VERIFIED', JSON.stringify(report.findings.slice(0, 5)));
    assert.equal(report.installation_id, m.installation_id);
    assert.equal(report.objects.referenced, m.content?.count);
    assert.equal(report.objects.verified, report.objects.referenced);
    assert.ok(report.objects.bytes > 0);
    assert.ok(report.audit.artifacts >= 6 && report.audit.broken === 0);
    assert.equal(report.unexpected.count, 0);
    assert.equal(report.derived.mismatched, 0, 'provenance documents were rebuilt in the new root');
    assert.equal((await readRestoreRecord(dst, r.record.restore_id))?.last_reconcile_status, 'VERIFIED');

    assert.equal(await readRestoreProof(dst), undefined, 'no proof before activation');
    const activation = await activateRestore(dst, report.reconcile_id, alice);
    assert.equal(activation.epoch, 2);
    assert.equal(await readEpoch(dst.items), 2);
    assert.equal(await isRestoreHeld(dst.items), false);
    assert.equal((await readRestoreRecord(dst, r.record.restore_id))?.status, 'ACTIVATED');
    const proof = await readRestoreProof(dst);
    assert.equal(proof?.installation_id, m.installation_id);
    assert.equal(proof?.backup_epoch, 1);
    assert.equal(proof?.manifest_digest, m.manifest_digest);
    await assert.rejects(activateRestore(dst, report.reconcile_id, alice), Conflict);

    // The restored installation serves the same verified bytes.
    const a = await openVersionContent(src, walked, 4);
    const b2 = await openVersionContent(dst, walked, 4);
    assert.deepEqual(await collect(b2.stream), await collect(a.stream));
    assert.deepEqual(await tableLines(src.items, notRegistry), beforeItems, 'the source is still unchanged');
  });

  it('a reference backup verifies against the source’s own root, fails in an empty new root, and verifies with fetched content', async () => {
    const { dir, src } = await source();
    const beforeContent = dirState(src.contentRoot);
    const out = path.join(dir, 'ref-backup');
    const { manifest } = await createBackup(src, { out, actor: 'os:tester' });
    assert.equal(manifest.with_content, false);
    assert.equal(fs.existsSync(path.join(out, 'content')), false, 'bytes are referenced, not copied');
    const immutable = manifest.objects.count - manifest.objects.mutable;

    // Same content root: nothing to copy, everything there.
    const same = await embeddedAt(path.join(dir, 'same'));
    Object.assign(same, { content: src.content });
    const r1 = await restoreBackup(same, { from: out, actor: 't' });
    assert.equal(r1.record.content_root_changed, false);
    assert.equal((await reconcile(same, { actor: 't' })).status, 'VERIFIED');
    assert.deepEqual(dirState(src.contentRoot), beforeContent, 'restoring into the source root wrote nothing there');

    // A new, empty root: every object is reported missing, by key.
    const empty = await embeddedAt(path.join(dir, 'empty'));
    await restoreBackup(empty, { from: out, actor: 't' });
    const failed = await reconcile(empty, { actor: 't' });
    assert.equal(failed.status, 'FAILED');
    assert.equal(failed.objects.missing, immutable);
    const missing = new Set(failed.findings.filter((f) => f.kind === 'object' && f.problem === 'missing').map((f) => f.key));
    for await (const o of (await openBackup(out)).objects()) if (!o.mutable) assert.ok(missing.has(o.key), o.key);
    await assert.rejects(activateRestore(empty, failed.reconcile_id, alice), IntegrityError);
    assert.equal(await isRestoreHeld(empty.items), true);

    // A new root with the bytes fetched from the source root: verified.
    const fetched = await embeddedAt(path.join(dir, 'fetched'));
    const r3 = await restoreBackup(fetched, { from: out, actor: 't', fetchFrom: src.content });
    assert.equal(r3.record.objects_copied, immutable);
    assert.equal((await reconcile(fetched, { actor: 't' })).status, 'VERIFIED');
    assert.deepEqual(dirState(src.contentRoot), beforeContent);
  });

  it('reconcile FAILED names a deleted object, a corrupted object, an edited audit row; FAILED results never activate', async () => {
    const { dir, src } = await source();
    const out = path.join(dir, 'b');
    await createBackup(src, { out, withContent: true, actor: 't' });
    const dst = await embeddedAt(path.join(dir, 'dst'));
    await restoreBackup(dst, { from: out, actor: 't' });
    const versions = (await allItems(dst.items)).filter((i) => i.type === 'version') as unknown as Array<{
      content_key: string;
      PK: string;
    }>;
    const [v1, v2] = versions;
    assert.ok(v1 && v2);
    const file = (key: string) => path.join(dst.contentRoot, ...key.split('/'));
    const failedIds: string[] = [];

    const deleted = fs.readFileSync(file(v1.content_key));
    fs.unlinkSync(file(v1.content_key));
    const r1 = await reconcile(dst, { actor: 't' });
    assert.equal(r1.status, 'FAILED');
    assert.deepEqual(
      r1.findings.filter((f) => f.kind === 'object').map((f) => [f.problem, f.key]),
      [['missing', v1.content_key]],
    );
    failedIds.push(r1.reconcile_id);
    await assert.rejects(activateRestore(dst, r1.reconcile_id, alice), /FAILED reconciliation can never be activated/);
    fs.writeFileSync(file(v1.content_key), deleted);

    const good = fs.readFileSync(file(v2.content_key));
    fs.writeFileSync(file(v2.content_key), Buffer.concat([good.subarray(0, good.length - 1), Buffer.from('X')]));
    const r2 = await reconcile(dst, { actor: 't' });
    assert.equal(r2.status, 'FAILED');
    assert.deepEqual(
      r2.findings.filter((f) => f.kind === 'object').map((f) => [f.problem, f.key]),
      [['corrupt', v2.content_key]],
    );
    failedIds.push(r2.reconcile_id);
    fs.writeFileSync(file(v2.content_key), good);

    await dst.items.close();
    const db = new Database(dst.dbPath);
    const row = db.prepare("SELECT PK, SK, attrs FROM items WHERE PK = ? AND SK LIKE 'TRANS#%' LIMIT 1").get(v1.PK) as {
      PK: string;
      SK: string;
      attrs: string;
    };
    const edited = JSON.parse(row.attrs) as Record<string, unknown>;
    edited.reason = 'rewritten history';
    db.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?').run(JSON.stringify(edited), row.PK, row.SK);
    db.close();
    const reopened = await embeddedAt(dst.dir);
    const r3 = await reconcile(reopened, { actor: 't' });
    assert.equal(r3.status, 'FAILED');
    assert.ok(
      r3.findings.some((f) => f.kind === 'audit' && f.row === `${row.PK} ${row.SK}`),
      JSON.stringify(r3.findings),
    );
    assert.equal(r3.objects.missing + r3.objects.corrupt, 0);
    failedIds.push(r3.reconcile_id);
    // Persisted, with its findings.
    const stored = await reopened.items.get({ PK: `RESTORE#${r3.restore_id}`, SK: `RECONCILE#${r3.reconcile_id}` });
    assert.equal(stored?.status, 'FAILED');
    assert.ok(((stored?.findings ?? []) as unknown[]).length > 0);
    await reopened.items.close();

    const fixed = new Database(dst.dbPath);
    fixed.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?').run(row.attrs, row.PK, row.SK);
    fixed.close();
    const again = await embeddedAt(dst.dir);
    const ok = await reconcile(again, { actor: 't' });
    assert.equal(ok.status, 'VERIFIED', JSON.stringify(ok.findings.slice(0, 3)));
    for (const id of failedIds) await assert.rejects(activateRestore(again, id, alice), IntegrityError);
    await assert.rejects(activateRestore(again, ok.reconcile_id, agent), /human/);
    await activateRestore(again, ok.reconcile_id, alice);
    assert.equal(await isRestoreHeld(again.items), false);
  });

  it('only the latest reconciliation can activate, and it must be of this installation', async () => {
    const { dir, src } = await source();
    const out = path.join(dir, 'b');
    await createBackup(src, { out, withContent: true, actor: 't' });
    const dst = await embeddedAt(path.join(dir, 'dst'));
    await restoreBackup(dst, { from: out, actor: 't' });
    const first = await reconcile(dst, { actor: 't' });
    const second = await reconcile(dst, { actor: 't' });
    assert.equal(first.status, 'VERIFIED');
    await assert.rejects(activateRestore(dst, first.reconcile_id, alice), /not the latest/);
    // A VERIFIED result whose installation does not match this one's is refused.
    await dst.items.update({ PK: 'SYS#installation', SK: 'INSTALLATION' }, { set: { installation_id: 'someone-else' } });
    const foreign = await reconcile(dst, { actor: 't' });
    await assert.rejects(activateRestore(dst, foreign.reconcile_id, alice), /not of this installation/);
    assert.equal(await isRestoreHeld(dst.items), true);
    void second;
  });

  it('backups are write-once and tamper-evident; restores go only into empty storage, and an interrupted one resumes', async () => {
    const { dir, src } = await source();
    const out = path.join(dir, 'b');
    await createBackup(src, { out, withContent: true, actor: 't' });
    await assert.rejects(createBackup(src, { out, actor: 't' }), Conflict);
    assert.deepEqual(
      fs.readdirSync(dir).filter((n) => n.includes('partial')),
      [],
      'no partial directory is left by a completed or refused backup',
    );

    // Tampered copies are refused before anything is written.
    for (const [file, edit] of [
      ['items.jsonl', (t: string) => t.replace('"DRAFT"', '"APPROVED"')],
      [MANIFEST_FILE, (t: string) => t.replace('"epoch": 1', '"epoch": 7')],
    ] as const) {
      const copy = path.join(dir, `tampered-${file}`);
      fs.cpSync(out, copy, { recursive: true });
      const p = path.join(copy, file);
      const text = fs.readFileSync(p, 'utf8');
      assert.notEqual(edit(text), text);
      fs.writeFileSync(p, edit(text));
      const target = await embeddedAt(path.join(dir, `t-${file}`));
      await assert.rejects(restoreBackup(target, { from: copy, actor: 't' }), IntegrityError);
      assert.deepEqual(await allItems(target.items), [], 'nothing was written');
    }

    await assert.rejects(restoreBackup(src, { from: out, actor: 't' }), /not empty/);

    // Interrupted after the first chunk of items (the progress callback throws, as a crash would stop it).
    const dst = await embeddedAt(path.join(dir, 'dst'));
    let chunks = 0;
    await assert.rejects(
      restoreBackup(dst, {
        from: out,
        actor: 't',
        chunk: 10,
        progress: (phase) => ({
          tick: () => {
            if (phase === 'items' && ++chunks === 2) throw new Error('crash');
          },
        }),
      }),
      /crash/,
    );
    const partial = await reconcile(dst, { actor: 't' });
    assert.equal(partial.status, 'FAILED');
    assert.equal(partial.restore?.status, 'RESTORING');
    const backupKeys = [] as string[];
    for await (const item of (await openBackup(out)).items()) backupKeys.push(`${item.PK} ${item.SK}`);
    const present = new Set((await allItems(dst.items)).map((i) => `${i.PK} ${i.SK}`));
    const reallyMissing = backupKeys.filter((k) => !present.has(k)).sort();
    assert.equal(reallyMissing.length, backupKeys.length - 20);
    assert.deepEqual(
      partial.findings
        .filter((f) => f.kind === 'item')
        .map((f) => f.row)
        .sort(),
      reallyMissing,
    );
    assert.equal(partial.restore?.items_missing, reallyMissing.length);
    await assert.rejects(activateRestore(dst, partial.reconcile_id, alice), IntegrityError);

    const resumed = await restoreBackup(dst, { from: out, actor: 't' });
    assert.equal(resumed.resumed, true);
    const done = await reconcile(dst, { actor: 't' });
    assert.equal(done.status, 'VERIFIED', JSON.stringify(done.findings.slice(0, 3)));
    await assert.rejects(restoreBackup(dst, { from: out, actor: 't' }), /already restored/);
  });

  it('without a restore, reconcile is a health check persisted under SYS#installation; there is nothing to activate', async () => {
    const { src } = await source();
    const r = await reconcile(src, { actor: 't' });
    assert.equal(r.status, 'VERIFIED', JSON.stringify(r.findings.slice(0, 3)));
    assert.equal(r.restore_id, null);
    assert.equal((await src.items.get({ PK: 'SYS#installation', SK: `RECONCILE#${r.reconcile_id}` }))?.status, 'VERIFIED');
    await assert.rejects(activateRestore(src, r.reconcile_id, alice), /nothing to activate/);
    // An unexpected object is reported, never deleted, and does not fail the result.
    await src.content.put('artifacts/ORPHAN/v1/x', [Buffer.from('orphan')]);
    const r2 = await reconcile(src, { actor: 't' });
    assert.equal(r2.status, 'VERIFIED');
    assert.deepEqual(
      r2.findings.filter((f) => f.kind === 'unexpected').map((f) => f.key),
      ['artifacts/ORPHAN/v1/x'],
    );
    assert.ok(await src.content.head('artifacts/ORPHAN/v1/x'));

    // An empty store: FAILED, and left empty (a restore can still begin there).
    const empty = await embeddedAt(tempDir('alp-empty'));
    const e = await reconcile(empty, { actor: 't' });
    assert.equal(e.status, 'FAILED');
    assert.equal(e.persisted, false);
    assert.deepEqual(await allItems(empty.items), []);
  });
});
