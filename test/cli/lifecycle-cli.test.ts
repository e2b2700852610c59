import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { tempDir } from '../helpers/tmp.ts';

type Json = Record<string, unknown>;

describe('alp CLI: the lifecycle', () => {
  it('drives the lifecycle, answers every RFC §9.1 access pattern paginated, and catches an edited audit row', async () => {
    const dir = tempDir('alp-cli');
    const data = path.join(dir, 'd');
    const file = (name: string, text: string) => {
      const p = path.join(dir, name);
      fs.writeFileSync(p, text);
      return p;
    };
    // Agent tokens cannot fix the clock (issue 14 item 6): the walk runs on the real clock.
    const now = new Date().toISOString();
    const env = {};
    const run = (args: string[], o: { env?: Record<string, string>; token?: string } = {}) =>
      alpJson([...args, '--data', data], { env: { ...env, ...o.env } });
    await run(['init']);
    const human = await run(['token', 'create', '--principal', 'alice', '--kind', 'human']);
    const agentTok = await run(['token', 'create', '--principal', 'bot', '--kind', 'agent']);
    const asAgent = { ALP_TOKEN: agentTok.token as string };
    const asHuman = { ALP_TOKEN: human.token as string };

    const v1 = await run(['artifact', 'create', '--name', 'migrate', '--file', file('m.sql', 'select 1;'), '--kind', 'migration'], {
      env: asAgent,
    });
    const id = v1.artifact_id as string;
    assert.equal((v1.created_by as Json).id, 'bot');
    assert.equal((await run(['artifact', 'propose', id], { env: asAgent })).state, 'PROPOSED');
    const refused = await runAlp(['artifact', 'approve', id, '--version', '1', '--evidence', 'x', '--data', data], {
      env: { ...env, ...asAgent },
    });
    assert.equal(refused.code, 6);
    assert.match(refused.stderr, /^alp: FORBIDDEN: /m);
    const approved = await run(['artifact', 'approve', id, '--version', '1', '--evidence', 'CR-9', '--expires-in', '2d'], { env: asHuman });
    assert.equal((approved.version as Json).state, 'APPROVED');
    const started = await run(['exec', 'start', id, '--version', '1'], { env: asAgent });
    const runId = started.run_id as string;
    await run(['exec', 'upload', runId, 'stdout.log', '--file', file('out.log', 'migrated\n')], { env: asAgent });
    const finished = await run(['exec', 'finish', runId, '--status', 'SUCCEEDED', '--exit-code', '0'], { env: asAgent });
    assert.equal(finished.status, 'SUCCEEDED');
    const comp = await run(['compensate', id, '--version', '1', '--file', file('undo.sql', 'drop 1;')], { env: asAgent });
    assert.equal((comp.compensated as Json).state, 'COMPENSATING');
    await run(['provenance', 'add', id, '--action', 'generate', '--model', 'm@1', '--output', v1.content_hash as string], { env: asAgent });
    const intoto = await runAlp(['provenance', 'show', id, '--format', 'in-toto', '--data', data], { env });
    assert.equal(JSON.parse(intoto.stdout)._type, 'https://in-toto.io/Statement/v1');
    const illegal = await runAlp(['artifact', 'transition', id, '--version', '1', '--to', 'ARCHIVED', '--data', data], { env });
    assert.equal(illegal.code, 4);
    assert.match(illegal.stderr, /^alp: ILLEGAL_TRANSITION: /m);

    const hist = await run(['history', id]);
    const types = (hist.entries as Json[]).map((e) => e.type);
    assert.deepEqual(types.slice(0, 4), ['transition', 'transition', 'approval', 'transition']);
    assert.deepEqual(
      (hist.entries as Json[]).map((e) => e.seq),
      types.map((_, i) => i + 1),
    );

    const day = now.slice(0, 10);
    const patterns: Array<[string[], number]> = [
      [['artifact', 'list', '--state', 'COMPENSATING'], 1],
      [['query', 'transitions', '--date', day], 7],
      [['query', 'approvals', '--approver', 'alice'], 1],
      [['query', 'runs', '--date', day], 1],
      [['query', 'provenance', '--date', day], 1],
      [['query', 'compensations', '--state', 'DRAFT'], 1],
    ];
    // The walk may cross midnight (UTC): a date pattern is asked for every day it spanned.
    const days = [...new Set([day, new Date().toISOString().slice(0, 10)])];
    for (const [args, expected] of patterns) {
      const seen: Json[] = [];
      for (const asked of args.includes(day) ? days.map((d) => args.map((a) => (a === day ? d : a))) : [args]) {
        let cursor: string | undefined;
        do {
          const page = await run([...asked, '--limit', '2', ...(cursor ? ['--cursor', cursor] : [])]);
          seen.push(...(page.items as Json[]));
          cursor = page.cursor as string | undefined;
        } while (cursor);
      }
      assert.equal(seen.length, expected, args.join(' '));
      const compId = (comp.compensation as Json).artifact_id;
      assert.ok(
        seen.every((i) => i.artifact_id === id || i.artifact_id === compId),
        args.join(' '),
      );
    }

    const clean = await runAlp(['audit', 'verify', '--data', data, '--json'], { env });
    assert.equal(clean.code, 0, clean.stderr);
    assert.equal(JSON.parse(clean.stdout).ok, true);
    const db = new Database(path.join(data, 'alp.db'));
    const row = db.prepare("SELECT PK, SK, attrs FROM items WHERE PK = ? AND SK LIKE 'APPROVAL#%'").get(`ART#${id}`) as {
      PK: string;
      SK: string;
      attrs: string;
    };
    db.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?').run(row.attrs.replace('CR-9', 'CR-0'), row.PK, row.SK);
    db.close();
    const broken = await runAlp(['audit', 'verify', id, '--data', data], { env });
    assert.equal(broken.code, 5);
    assert.ok(broken.stderr.includes(`${row.PK} ${row.SK}`), broken.stderr);
  });
});
