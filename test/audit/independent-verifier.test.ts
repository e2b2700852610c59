/**
 * The audit hash format of docs/audit-format.md is precise enough for an independent verifier: a
 * Python script that shares no code with ALP (scripts/verify-audit.py: its own canonical JSON,
 * its own view-field table) recomputes every hash and link of a real SQLite installation that walked
 * every state, and agrees with ALP; a changed hashed attribute, a view field, and a broken link are
 * told apart as the format says; and a migrated installation (entries moved by a key migration, hashed
 * under their `moved_from_sk`) verifies the same.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { checkSchema } from '../../src/system/schema.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { allItems } from '../helpers/items.ts';
import { toSchema1 } from '../helpers/schema1.ts';
import { walkEveryState } from '../helpers/walk.ts';

after(stopDistributedServers);

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/verify-audit.py');

interface Report {
  artifacts: number;
  entries: number;
  segments: number;
  findings: Array<{ artifact: string; seq: number | null; finding: string }>;
}

function pyVerify(source: string, env: Record<string, string> = {}): { code: number; report: Report } {
  const r = spawnSync('python3', [SCRIPT, source], { encoding: 'utf8', env: { ...process.env, ...env } });
  assert.equal(r.stderr, '', r.stderr);
  return { code: r.status ?? -1, report: JSON.parse(r.stdout) as Report };
}

test('python3 recomputes every audit hash and link of a walked SQLite installation from the written format', async () => {
  assert.match(execFileSync('python3', ['--version'], { encoding: 'utf8' }), /^Python 3/);
  const ctx = await embeddedContext();
  const { id, compensations } = await walkEveryState(ctx);
  const ours = await verifyArtifactAudit(ctx, id);
  assert.equal(ours.ok, true);
  await ctx.items.close();

  const clean = pyVerify(ctx.dbPath);
  assert.deepEqual(clean.report.findings, []);
  assert.equal(clean.code, 0);
  assert.equal(clean.report.artifacts, 1 + compensations.length);
  assert.ok(clean.report.entries >= 30, `entries ${clean.report.entries}`);

  const db = new Database(ctx.dbPath);
  try {
    const execRow = db.prepare("SELECT PK, SK, attrs FROM items WHERE PK = ? AND SK LIKE 'EXEC#%' LIMIT 1").get(`ART#${id}`) as {
      PK: string;
      SK: string;
      attrs: string;
    };
    const setAttrs = db.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?');

    // A view field (an execution's status) may change: still verifies.
    const view = JSON.parse(execRow.attrs) as Record<string, unknown>;
    setAttrs.run(JSON.stringify({ ...view, status: 'SOMETHING_ELSE' }), execRow.PK, execRow.SK);
    assert.deepEqual(pyVerify(ctx.dbPath).report.findings, []);

    // A hashed field (the content hash the run started on) may not.
    setAttrs.run(JSON.stringify({ ...view, content_hash: `sha256:${'0'.repeat(64)}` }), execRow.PK, execRow.SK);
    const tampered = pyVerify(ctx.dbPath);
    assert.equal(tampered.code, 1);
    assert.deepEqual(
      tampered.report.findings.map((f) => f.finding),
      ['hash mismatch'],
    );
    setAttrs.run(execRow.attrs, execRow.PK, execRow.SK);
    assert.equal(pyVerify(ctx.dbPath).code, 0);

    // A re-hashed entry (consistent in itself) breaks the next entry's prev_hash link.
    const first = db.prepare("SELECT PK, SK, attrs FROM items WHERE PK = ? AND SK LIKE 'TRANS#%' ORDER BY SK LIMIT 1").get(`ART#${id}`) as {
      PK: string;
      SK: string;
      attrs: string;
    };
    const entry = JSON.parse(first.attrs) as Record<string, unknown>;
    assert.equal(entry.seq, 1);
    assert.equal(entry.prev_hash, null);
    setAttrs.run(JSON.stringify({ ...entry, reason: 'rewritten', hash: `sha256:${'1'.repeat(64)}` }), first.PK, first.SK);
    const relinked = pyVerify(ctx.dbPath).report.findings.map((f) => [f.seq, f.finding]);
    assert.deepEqual(relinked, [
      [1, 'hash mismatch'],
      [2, 'prev_hash does not link to the previous entry'],
    ]);
  } finally {
    db.close();
  }
});

test('python3 recomputes every audit hash and link of a walked DynamoDB Local installation, read through boto3', async () => {
  const inst = await distributedInstallation();
  try {
    const { id, compensations } = await walkEveryState(inst.ctx);
    assert.equal((await verifyArtifactAudit(inst.ctx, id)).ok, true);
    const { code, report } = pyVerify(inst.metadataUrl, inst.env);
    assert.deepEqual(report.findings, []);
    assert.equal(code, 0);
    assert.equal(report.artifacts, 1 + compensations.length);
    assert.ok(report.entries >= 30, `entries ${report.entries}`);

    // A hashed attribute changed in the table is found.
    const exec = (await inst.ctx.items.query({ pk: `ART#${id}`, sk: { beginsWith: 'EXEC#' }, consistent: true })).items.find(
      (i) => i.type === 'execution',
    );
    assert.ok(exec);
    await inst.ctx.items.update({ PK: exec.PK, SK: exec.SK }, { set: { started_by: { id: 'mallory', kind: 'human' } } });
    const tampered = pyVerify(inst.metadataUrl, inst.env);
    assert.equal(tampered.code, 1);
    assert.deepEqual(
      tampered.report.findings.map((f) => f.finding),
      ['hash mismatch'],
    );
  } finally {
    await inst.close();
  }
});

test('python3 verifies a migrated installation: moved entries under moved_from_sk, and refuses a moved entry whose old key was edited', async () => {
  const ctx = await embeddedContext();
  await initInstallation(ctx);
  const { id } = await walkEveryState(ctx);
  await toSchema1(ctx);
  await checkSchema(ctx.items); // the installation 1 → 2 migration
  const moved = (await allItems(ctx.items)).filter((i) => typeof i.moved_from_sk === 'string');
  assert.ok(moved.length >= 4, `${moved.length} moved entries`);
  assert.equal((await verifyArtifactAudit(ctx, id)).ok, true);
  await ctx.items.close();
  assert.deepEqual(pyVerify(ctx.dbPath).report.findings, []);
  const db = new Database(ctx.dbPath);
  try {
    const m = moved[0] as (typeof moved)[number];
    const row = db.prepare('SELECT attrs FROM items WHERE PK = ? AND SK = ?').get(m.PK, m.SK) as { attrs: string };
    const attrs = JSON.parse(row.attrs) as Record<string, unknown>;
    db.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?').run(
      JSON.stringify({ ...attrs, moved_from_sk: `${String(attrs.moved_from_sk)}x` }),
      m.PK,
      m.SK,
    );
    const tampered = pyVerify(ctx.dbPath);
    assert.equal(tampered.code, 1);
    assert.deepEqual(
      tampered.report.findings.map((f) => [f.seq, f.finding]),
      [[m.seq, 'hash mismatch']],
    );
  } finally {
    db.close();
  }
});
