/**
 * The README walkthrough, through the real `alp` process: backup → restore into a new directory →
 * reconcile → VERIFIED → activate; a FAILED reconciliation refused activation; epochs; crash recovery
 * of the maintenance fence.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { acquireMaintenance } from '../../src/system/fence.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { tempDir } from '../helpers/tmp.ts';
import { embeddedAt } from './helpers.ts';

type Json = Record<string, unknown>;

describe('alp CLI: recovery', () => {
  it('walks backup → restore → reconcile → activate, refuses a FAILED activation, and recovers a crashed fence', async () => {
    const dir = tempDir('alp-rcli');
    const src = path.join(dir, 'alp-data');
    const input = path.join(dir, 'deploy.sh');
    fs.writeFileSync(input, 'echo deploy\n');
    const at = (d: string) => ['--data', d];
    await alpJson(['init', ...at(src)]);
    const created = await alpJson(['artifact', 'create', '--name', 'deploy', '--file', input, ...at(src)]);
    await alpJson(['provenance', 'add', created.artifact_id as string, '--action', 'generate', ...at(src)]);

    // 1. A reference backup, restored into a new directory with the bytes fetched from the source root.
    const bk = path.join(dir, 'backups', 'nightly');
    const backup = await alpJson(['backup', '--out', bk, ...at(src)]);
    const manifest = backup.manifest as Json;
    assert.equal(manifest.consistency, 'point-in-time');
    assert.equal(((await alpJson(['backups', ...at(src)])).backups as Json[])[0]?.status, 'COMPLETE');
    const again = await runAlp(['backup', '--out', bk, ...at(src)]);
    assert.equal(again.code, 4, 'backups are write-once');

    const dst = path.join(dir, 'restored');
    const restored = await alpJson(['restore', '--from', bk, '--fetch-content', ...at(dst)]);
    assert.equal(restored.status, 'RESTORED');
    assert.equal(restored.installation_id, manifest.installation_id);
    const held = await runAlp(['maintenance', 'status', ...at(dst)]);
    assert.equal(held.code, 0);
    const verified = await alpJson(['reconcile', ...at(dst)]);
    assert.equal(verified.status, 'VERIFIED');
    const activated = await alpJson(['reconcile', '--activate', ...at(dst)]);
    assert.equal((activated.activation as Json).epoch, 2);
    assert.equal((await alpJson(['epoch', 'show', ...at(dst)])).epoch, 2);
    const shown = await runAlp(['artifact', 'get', created.artifact_id as string, '--out', '-', ...at(dst)]);
    assert.equal(shown.stdout, 'echo deploy\n');

    // 2. A restore whose content root lacks an object: FAILED, exit 5, never activated.
    const bad = path.join(dir, 'bad');
    await alpJson(['restore', '--from', bk, '--fetch-content', ...at(bad)]);
    const key = `artifacts/${created.artifact_id as string}/v1/deploy.sh`;
    fs.unlinkSync(path.join(bad, 'content', ...key.split('/')));
    const failed = await runAlp(['reconcile', '--activate', '--json', ...at(bad)]);
    assert.equal(failed.code, 5);
    assert.match(failed.stderr, /^alp: INTEGRITY: reconciliation FAILED \(not activated/m);
    const report = JSON.parse(failed.stdout) as Json;
    assert.equal(report.status, 'FAILED');
    assert.equal(report.activation, undefined);
    assert.ok((report.findings as Json[]).some((f) => f.key === key && f.problem === 'missing'));
    assert.equal((await alpJson(['epoch', 'show', ...at(bad)])).epoch, 1, 'not activated: the epoch did not move');

    // 3. A maintenance that crashed keeps the fence until an operator recovers it in a newer epoch.
    const ctx = await embeddedAt(src);
    await acquireMaintenance(ctx, 1, 'retention os:night', { purpose: 'purge' });
    await ctx.items.close();
    const status = await alpJson(['maintenance', 'status', ...at(src)]);
    assert.equal((status.fence as Json).holder, 'retention os:night');
    const refused = await runAlp(['artifact', 'version', created.artifact_id as string, '--file', input, ...at(src)]);
    assert.equal(refused.code, 4);
    assert.match(refused.stderr, /^alp: MAINTENANCE: /m);
    const tooSoon = await runAlp(['maintenance', 'release', '--epoch', '1', ...at(src)]);
    assert.equal(tooSoon.code, 4);
    assert.match(tooSoon.stderr, /alp epoch advance/);
    const agentToken = (await alpJson(['token', 'create', '--principal', 'bot', '--kind', 'agent', ...at(dst)])).token as string;
    const notHuman = await runAlp(['epoch', 'advance', ...at(dst)], { env: { ALP_TOKEN: agentToken } });
    assert.equal(notHuman.code, 6);
    const advanced = await alpJson(['epoch', 'advance', '--reason', 'night maintenance died', ...at(src)]);
    assert.deepEqual([advanced.previous, advanced.epoch], [1, 2]);
    assert.equal(((await alpJson(['epoch', 'show', ...at(src)])).history as Json[])[0]?.reason, 'night maintenance died');
    const recovered = await alpJson(['maintenance', 'release', '--epoch', '2', ...at(src)]);
    assert.equal(recovered.recovered, true);
    assert.equal((recovered.abandoned as Json).holder, 'retention os:night');
    assert.equal((await alpJson(['maintenance', 'status', ...at(src)])).fence, undefined);
    await alpJson(['artifact', 'version', created.artifact_id as string, '--file', input, ...at(src)]);
  });
});
