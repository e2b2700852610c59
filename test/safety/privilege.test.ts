/**
 * Issue 14 item 6: one access table (src/lifecycle/access.ts) decides for every entry point. The CLI
 * runs in a child process with tokens of each kind, a made-up token and ALP_NOW; the services are
 * called directly (a future client that skips the entry points still meets the table).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Command } from 'commander';
import { ROUTES } from '../../src/api/access.ts';
import { COMMAND_OPERATIONS } from '../../src/cli/operations.ts';
import { buildProgram } from '../../src/cli/program.ts';
import { Forbidden } from '../../src/core/errors.ts';
import { OPERATIONS } from '../../src/lifecycle/access.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';

type Json = Record<string, unknown>;
const exporter: Principal = { id: 'exporter', kind: 'service' };

describe('issue 14 item 6: the CLI asks the shared access table', () => {
  it('issue 14 item 6: agent and service tokens, a made-up token and ALP_NOW are held to their kinds on the CLI', async () => {
    const dir = tempDir('alp-priv');
    const data = path.join(dir, 'd');
    const file = path.join(dir, 'job.sh');
    fs.writeFileSync(file, 'echo job\n');
    const at = ['--data', data];
    const as = (token: string, extra: Record<string, string> = {}) => ({ env: { ALP_TOKEN: token, ...extra } });
    const refused = async (args: string[], opts: Parameters<typeof runAlp>[1], code: string, why: string) => {
      const r = await runAlp([...args, ...at], opts);
      assert.equal(r.code, 6, `${why}: alp ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
      assert.match(r.stderr, new RegExp(`^alp: ${code}: `, 'm'), why);
      return r;
    };

    await alpJson(['init', ...at]);
    // The local operator (no token) mints tokens of every kind; a human token mints too.
    const human = (await alpJson(['token', 'create', '--principal', 'lead', '--kind', 'human', ...at])).token as string;
    const bot = (await alpJson(['token', 'create', '--principal', 'bot', '--kind', 'agent', ...at])).token as string;
    const svc = (await alpJson(['token', 'create', '--principal', 'exporter', '--kind', 'service', ...at], as(human))).token as string;

    // An agent may create and propose, but never mint a token (of any kind), approve, archive or back up.
    const created = await alpJson(['artifact', 'create', '--name', 'job', '--file', file, ...at], as(bot));
    const id = created.artifact_id as string;
    assert.equal((await alpJson(['artifact', 'propose', id, ...at], as(bot))).state, 'PROPOSED');
    await refused(['token', 'create', '--principal', 'evil', '--kind', 'human'], as(bot), 'FORBIDDEN', 'an agent mints a human token');
    await refused(['token', 'create', '--principal', 'bot2', '--kind', 'agent'], as(bot), 'FORBIDDEN', 'an agent mints a token');
    await refused(['archive', id], as(bot), 'FORBIDDEN', 'an agent archives');
    await refused(['backup', '--out', path.join(dir, 'b1')], as(bot), 'FORBIDDEN', 'an agent backs up');
    assert.equal(fs.existsSync(path.join(dir, 'b1')), false, 'nothing was written');

    // A service token reads, and only reads.
    assert.equal((await alpJson(['artifact', 'show', id, ...at], as(svc))).artifact_id, id);
    await refused(['artifact', 'create', '--name', 'svc', '--file', file], as(svc), 'FORBIDDEN', 'a service creates');
    await refused(['artifact', 'withdraw', id], as(svc), 'FORBIDDEN', 'a service withdraws');
    await refused(['provenance', 'add', id, '--action', 'review'], as(svc), 'FORBIDDEN', 'a service adds provenance');

    // A made-up token is UNAUTHENTICATED, for reads too.
    const madeUp = 'alp_thisTokenWasNeverIssuedByThisInstallation00';
    await refused(['artifact', 'list'], as(madeUp), 'UNAUTHENTICATED', 'a made-up token reads');
    const viaFlag = await runAlp(['artifact', 'show', id, '--token', 'garbage', ...at]);
    assert.equal(viaFlag.code, 6, viaFlag.stderr);
    assert.match(viaFlag.stderr, /^alp: UNAUTHENTICATED: /m);

    // A human token is a human, not the operator: operator-only commands need no token.
    await refused(['backup', '--out', path.join(dir, 'b2')], as(human), 'FORBIDDEN', 'a human token backs up');
    await refused(['epoch', 'show'], as(bot), 'FORBIDDEN', 'an agent reads the epoch');
    assert.equal((await alpJson(['epoch', 'show', ...at])).epoch, 1);

    // The clock: a human approves at a fixed past time for one hour (so the approval has expired by
    // now); the agent cannot move the clock back to execute on it.
    const past = '2026-01-05T10:00:00.000Z';
    const approved = await alpJson(
      ['artifact', 'approve', id, '--version', '1', '--evidence', 'CR-1', '--expires-in', '1h', ...at],
      as(human, { ALP_NOW: past }),
    );
    assert.equal((approved.version as Json).state, 'APPROVED');
    const moved = await refused(['exec', 'start', id, '--version', '1'], as(bot, { ALP_NOW: past }), 'FORBIDDEN', 'an agent sets ALP_NOW');
    assert.match(moved.stderr, /ALP_NOW may be set only by the local operator/);
    await refused(['artifact', 'list'], as(svc, { ALP_NOW: past }), 'FORBIDDEN', 'a service sets ALP_NOW');
    const honest = await runAlp(['exec', 'start', id, '--version', '1', ...at], as(bot));
    assert.notEqual(honest.code, 0, 'the approval has expired in real time');
    assert.match(honest.stderr, /expired/);
    // The operator may still fix the clock.
    const show = await runAlp(['artifact', 'show', id, ...at], { env: { ALP_NOW: past } });
    assert.equal(show.code, 0, show.stderr);
  });

  it('issue 14 item 6: every CLI command and every HTTP route names an operation of the one table', () => {
    const paths: string[] = [];
    const walk = (c: Command, p: string[]) => {
      for (const s of c.commands) {
        const here = [...p, s.name()];
        if (s.commands.length === 0 || ['history', 'search'].includes(here.join(' '))) paths.push(here.join(' '));
        walk(s, here);
      }
    };
    walk(buildProgram(), []);
    assert.deepEqual([...paths].sort(), Object.keys(COMMAND_OPERATIONS).sort(), 'the CLI table lists exactly the commands');
    for (const [cmd, op] of Object.entries(COMMAND_OPERATIONS)) assert.ok(op in OPERATIONS, `${cmd}: ${op}`);
    for (const [id, spec] of Object.entries(ROUTES)) {
      if (spec.operation === 'public') continue;
      assert.ok(spec.operation in OPERATIONS, id);
      assert.deepEqual(spec.access, OPERATIONS[spec.operation], `${id} takes its kinds from the shared table`);
    }
  });

  it('issue 14 item 6: the services refuse a principal beyond its kind (no entry point needed)', async () => {
    const ctx = await embeddedContext();
    try {
      const isForbidden = (e: unknown) => e instanceof Forbidden;
      await assert.rejects(createArtifact(ctx, exporter, { name: 's', filename: 's.txt', body: bytesOf('s\n') }), isForbidden);
      const { version } = await createArtifact(ctx, agent, { name: 'a', filename: 'a.txt', body: bytesOf('a\n') });
      const id = version.artifact_id;
      await assert.rejects(propose(ctx, exporter, id, 1), isForbidden);
      await propose(ctx, agent, id, 1);
      await assert.rejects(decide(ctx, agent, id, 1, { decision: 'REJECT', evidenceRef: 'x' }), isForbidden);
      await decide(ctx, alice, id, 1, { decision: 'REJECT', evidenceRef: 'x' });
      await assert.rejects(archiveArtifact(ctx, agent, id), isForbidden);
      await assert.rejects(createToken(ctx, { principal: 'evil', kind: 'human' }, agent), isForbidden);
      await assert.rejects(createToken(ctx, { principal: 'evil', kind: 'agent' }, exporter), isForbidden);
      assert.equal((await createToken(ctx, { principal: 'bob', kind: 'human' }, alice)).principal.id, 'bob');
      assert.equal((await archiveArtifact(ctx, alice, id)).archived.length > 0, true);
    } finally {
      await ctx.items.close();
      await ctx.content.close();
    }
  });
});
