/**
 * Issue 17 B13 seen from recovery: after a verified archive the hot original is no longer a reference
 * (the copy is) and retention may reclaim it. A backup lists it `superseded`; with --with-content it
 * reads the original while it exists and, once it is gone, the copy's bytes (stored under the
 * original's key, so a restore is whole). (The fs engine's
 * archive copies are readable; a cold S3 copy without its original is ARCHIVED_COLD, as before.)
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { archivedOriginals } from '../../src/lifecycle/references.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { openBackup } from '../../src/recovery/backup-format.ts';
import { tempDir } from '../helpers/tmp.ts';
import { allItems, embeddedAt, populate } from './helpers.ts';

describe('backup of archived originals (issue 17 B13)', () => {
  it('an archived original that is gone is backed up from its verified copy and listed superseded', async () => {
    const dir = tempDir('alp-backup-archived');
    const ctx = await embeddedAt(path.join(dir, 'src'));
    await populate(ctx, 1);
    const copies = (await allItems(ctx.items)).flatMap(archivedOriginals);
    assert.ok(copies.length > 0, 'the every-state walk archives something');
    const gone = copies[0] as (typeof copies)[number];
    assert.equal(await ctx.content.delete(gone.original), true);

    const { location, manifest } = await createBackup(ctx, { out: path.join(dir, 'b'), withContent: true, actor: 'os:op' });
    const listed = [];
    for await (const o of (await openBackup(location)).objects()) if (o.key === gone.original) listed.push(o);
    assert.equal(listed.length, 1);
    assert.equal(listed[0]?.superseded, true);
    const bytes = fs.readFileSync(path.join(location, manifest.content?.dir ?? 'content', gone.original));
    assert.equal(`sha256:${createHash('sha256').update(bytes).digest('hex')}`, gone.digest);

    await ctx.items.close();
  });
});
