import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError, InvalidInput, NotFound } from '../../src/core/errors.ts';
import { addVersion, createArtifact, listArtifacts, openVersionContent, showArtifact } from '../../src/lifecycle/artifacts.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { collectRefs, verifyObjects } from '../../src/lifecycle/verify-content.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';

const agent: Principal = { id: 'agent-1', kind: 'agent' };

describe('artifact creation and reads', () => {
  it('writes content, metadata.json, and rows exactly as DESIGN §3 lays them out', async () => {
    const ctx = await embeddedContext('2026-03-01T12:00:00.000Z');
    const { version, head } = await createArtifact(ctx, agent, {
      name: 'deploy script',
      filename: 'deploy.sh',
      kind: 'script',
      labels: { team: 'infra' },
      body: bytesOf('echo hi\n'),
    });
    const id = version.artifact_id;
    assert.equal(version.content_hash, sha256('echo hi\n'));
    assert.equal(fs.readFileSync(path.join(ctx.contentRoot, `artifacts/${id}/v1/deploy.sh`), 'utf8'), 'echo hi\n');
    const meta = JSON.parse(fs.readFileSync(path.join(ctx.contentRoot, `artifacts/${id}/v1/metadata.json`), 'utf8'));
    assert.equal(meta.content_hash, version.content_hash);
    assert.equal(sha256(fs.readFileSync(path.join(ctx.contentRoot, `artifacts/${id}/v1/metadata.json`))), version.metadata_hash);
    assert.equal(head.latest_version, 1);

    const db = new Database(ctx.dbPath, { readonly: true });
    const rows = db.prepare('SELECT PK, SK, GSI1PK, GSI1SK FROM items WHERE PK = ? ORDER BY SK').all(`ART#${id}`) as Array<
      Record<string, string>
    >;
    db.close();
    assert.deepEqual(rows, [
      // The HEAD's name entry is ARTNAME#{id} / NAME (issue 16); its GSI1 keys flag it pending for the
      // transparency log (issue 20 item 1: the creation entry is queued on the HEAD until a round takes it).
      { PK: `ART#${id}`, SK: 'HEAD', GSI1PK: 'TLOGH#0', GSI1SK: id },
      {
        PK: `ART#${id}`,
        SK: 'TRANS#2026-03-01T12:00:00.000Z#0000000001',
        GSI1PK: 'TRANS#2026-03-01',
        GSI1SK: `#2026-03-01T12:00:00.000Z#${id}`,
      },
      { PK: `ART#${id}`, SK: 'V#0000000001', GSI1PK: 'STATE#DRAFT', GSI1SK: `#2026-03-01T12:00:00.000Z#${id}` },
    ]);
  });

  it('numbers versions in order and reads each back verified', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'cfg', filename: 'a.yaml', body: bytesOf('v: 1\n') });
    const v2 = await addVersion(ctx, agent, version.artifact_id, { filename: 'a.yaml', body: bytesOf('v: 2\n') });
    const v3 = await addVersion(ctx, agent, version.artifact_id, { filename: 'b.yaml', body: bytesOf('v: 3\n') });
    assert.deepEqual([v2.version, v3.version], [2, 3]);
    const latest = await openVersionContent(ctx, version.artifact_id);
    assert.equal(latest.version.version, 3);
    assert.equal((await collect(latest.stream)).toString(), 'v: 3\n');
    assert.equal((await collect((await openVersionContent(ctx, version.artifact_id, 1)).stream)).toString(), 'v: 1\n');
    const shown = await showArtifact(ctx, version.artifact_id);
    assert.deepEqual(
      shown.versions.map((v) => [v.version, v.filename, v.state]),
      [
        [1, 'a.yaml', 'DRAFT'],
        [2, 'a.yaml', 'DRAFT'],
        [3, 'b.yaml', 'DRAFT'],
      ],
    );
  });

  it('concurrent new versions never share a number or an object key', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'c', filename: 'f', body: bytesOf('0') });
    const made = await Promise.all(
      Array.from({ length: 8 }, (_, i) => addVersion(ctx, agent, version.artifact_id, { filename: 'f', body: bytesOf(String(i + 1)) })),
    );
    assert.equal(new Set(made.map((v) => v.version)).size, 8);
    for (const v of made) {
      assert.equal((await collect((await openVersionContent(ctx, v.artifact_id, v.version)).stream)).toString().length > 0, true);
    }
    const report = await verifyObjects(ctx, await collectRefs(ctx, version.artifact_id));
    assert.deepEqual(report.findings, []);
  });

  it('a wrong expected digest stores nothing: no version, no object', async () => {
    const ctx = await embeddedContext();
    await assert.rejects(
      createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('abc'), expectedDigest: sha256('abd') }),
      IntegrityError,
    );
    const db = new Database(ctx.dbPath, { readonly: true });
    assert.equal((db.prepare('SELECT count(*) n FROM items').get() as { n: number }).n, 0);
    db.close();
    const listed: string[] = [];
    for await (const o of ctx.content.list('')) listed.push(o.key);
    assert.deepEqual(listed, []);
  });

  it('refuses bad names, kinds, labels and filenames before writing anything', async () => {
    const ctx = await embeddedContext();
    const cases = [
      { name: '', filename: 'f' },
      { name: 'a\u202eb', filename: 'f' },
      { name: 'ok', filename: '../f' },
      { name: 'ok', filename: 'metadata.json' },
      { name: 'ok', filename: 'f', kind: 'Bad Kind' },
      { name: 'ok', filename: 'f', labels: { 'bad key': 'v' } },
    ];
    for (const c of cases) await assert.rejects(createArtifact(ctx, agent, { ...c, body: bytesOf('x') }), InvalidInput, JSON.stringify(c));
    assert.equal((await ctx.items.scan()).items.length, 0);
  });

  it('a flipped byte is an IntegrityError on read and a finding of verify', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'data.bin', body: bytesOf(Buffer.alloc(100_000, 7)) });
    const file = path.join(ctx.contentRoot, version.content_key);
    const bytes = fs.readFileSync(file);
    bytes[50_000] = 8;
    fs.writeFileSync(file, bytes);
    await assert.rejects(collect((await openVersionContent(ctx, version.artifact_id)).stream), IntegrityError);
    const report = await verifyObjects(ctx, await collectRefs(ctx));
    assert.equal(report.objects, 2);
    assert.deepEqual(
      report.findings.map((f) => [f.key, f.problem]),
      [[version.content_key, 'corrupt']],
    );
    fs.unlinkSync(file);
    const again = await verifyObjects(ctx, await collectRefs(ctx));
    assert.deepEqual(
      again.findings.map((f) => f.problem),
      ['missing'],
    );
  });

  it('reading an unknown artifact or version is NotFound', async () => {
    const ctx = await embeddedContext();
    await assert.rejects(openVersionContent(ctx, '01NOPE'), NotFound);
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1') });
    await assert.rejects(openVersionContent(ctx, version.artifact_id, 2), NotFound);
  });

  it('lists by state and by name with pagination that returns every version once (property)', async () => {
    const ctx = await embeddedContext();
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      ctx.clock.advance(1000);
      const { version } = await createArtifact(ctx, agent, { name: i % 2 ? 'odd' : 'even', filename: 'f', body: bytesOf(String(i)) });
      ids.push(version.artifact_id);
    }
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 13 }), fc.constantFrom(undefined, 'DRAFT'), async (limit, state) => {
        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await listArtifacts(ctx, { state, limit, cursor });
          assert.ok(page.items.length <= limit);
          seen.push(...page.items.map((i) => i.artifact_id as string));
          cursor = page.cursor;
        } while (cursor);
        assert.deepEqual(seen, [...ids].reverse(), 'newest first, each once');
      }),
      { numRuns: 30 },
    );
    const odd = await listArtifacts(ctx, { name: 'odd', limit: 100 });
    assert.equal(odd.items.length, 6);
    assert.deepEqual((await listArtifacts(ctx, { state: 'APPROVED' })).items, []);
    await assert.rejects(listArtifacts(ctx, { state: 'NOPE' }), InvalidInput);
  });
});
