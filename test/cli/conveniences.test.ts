/**
 * What a new user tripped on (issue 19 item A7, and the --json errors of A3), through the real CLI on a
 * real installation: artifacts named by their unique name, --version defaulting to the version the
 * command acts on (and saying so), suggestions for mixed-up flags and misplaced subcommands, archiving
 * twice, commands outside an installation, `exec show` as text, labels in `artifact show`, the
 * program's --version in its help, `alp` alone, and errors as one JSON line with --json.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { localLookup } from '../../src/cli/backend-local.ts';
import { resolveArtifactRef } from '../../src/cli/targets.ts';
import { AlpError } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { runAlp } from '../helpers/cli.ts';
import { captureCli, clearCliEnv, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

type Json = Record<string, unknown>;

describe('CLI conveniences (issue 19 A7)', () => {
  let unpatch: () => void;
  let restoreEnv: () => void = () => {};
  let dir: string;
  let data: string;
  let human: string;
  /** The CLI in this process on the test installation (as the local operator unless `token`). */
  const alp = (args: string[], token?: string) => captureCli([...args, '--data', data, ...(token ? ['--token', token] : [])]);
  const json = async (args: string[], token?: string): Promise<Json> => {
    const r = await alp([...args, '--json'], token);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    return JSON.parse(r.stdout) as Json;
  };
  const file = (name: string, text: string) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, text);
    return p;
  };
  const create = async (name: string, labels: string[] = []) =>
    String((await json(['artifact', 'create', '--name', name, '--file', file(`${name}.sh`, `echo ${name}\n`), ...labels])).artifact_id);
  /** One error line on stderr: `alp: CODE: …` without --json. */
  const textError = (r: { code: number; stderr: string }, exit: number, code: string): string => {
    assert.equal(r.code, exit, r.stderr);
    const lines = r.stderr.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0] as string, new RegExp(`^alp: ${code}: `));
    return lines[0] as string;
  };

  before(async () => {
    restoreEnv = clearCliEnv();
    unpatch = patchCliOutput();
    dir = tempDir('alp-conveniences');
    data = path.join(dir, 'data');
    assert.equal((await captureCli(['init', '--data', data])).code, 0);
    human = String((await json(['token', 'create', '--principal', 'alice', '--kind', 'human'])).token);
  });
  after(() => {
    unpatch();
    restoreEnv();
  });

  it('artifact show NAME works for a unique name; a shared name is CONFLICT (AMBIGUOUS_NAME) listing every candidate', async () => {
    const id = await create('deploy');
    const shown = await json(['artifact', 'show', 'deploy']);
    assert.equal(shown.artifact_id, id);
    assert.equal((await json(['artifact', 'show', id])).artifact_id, id, 'ids keep working');
    // Every command taking an artifact resolves names the same way.
    assert.equal((await json(['artifact', 'propose', 'deploy'])).state, 'PROPOSED');
    assert.equal((await json(['history', 'deploy'])).artifact_id, id);

    const twins = [await create('twin'), await create('twin')];
    const line = textError(await alp(['artifact', 'show', 'twin']), 4, 'CONFLICT');
    assert.match(line, /2 artifacts are named "twin"/);
    for (const t of twins) assert.ok(line.includes(`${t} (created `), line);
    assert.match(line, /latest v1 DRAFT/);
    const asJson = await alp(['artifact', 'show', 'twin', '--json']);
    assert.equal(asJson.code, 4);
    const { error } = JSON.parse(asJson.stderr) as { error: { code: string; details: Json } };
    assert.equal(error.code, 'CONFLICT');
    assert.equal(error.details.reason, 'AMBIGUOUS_NAME');
    assert.deepEqual(
      (error.details.candidates as Json[]).map((c) => [c.artifact_id, c.latest_version, c.state]).sort(),
      twins.map((t) => [t, 1, 'DRAFT']).sort(),
    );
    textError(await alp(['artifact', 'show', 'no-such-name']), 3, 'NOT_FOUND');
  });

  it('resolves a reference exactly as a model of ids and names says (fast-check, on the real store)', async () => {
    const names = ['alpha', 'beta', 'gamma', 'delta'];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...names.slice(0, 3)), { maxLength: 6 }),
        fc.constantFrom(...names),
        async (made, asked) => {
          const ctx = await embeddedContext();
          try {
            const ids: Record<string, string[]> = {};
            for (const name of made) {
              const { version } = await createArtifact(ctx, agent, { name, filename: 'f.sh', body: bytesOf(name) });
              (ids[name] ??= []).push(version.artifact_id);
            }
            const same = ids[asked] ?? [];
            const outcome = await resolveArtifactRef(localLookup(ctx), asked).catch((e: unknown) =>
              e instanceof AlpError ? e : Promise.reject(e),
            );
            if (same.length === 1) assert.equal(outcome, same[0]);
            else {
              assert.ok(outcome instanceof AlpError);
              assert.equal(outcome.code, same.length === 0 ? 'NOT_FOUND' : 'CONFLICT');
              if (same.length > 1)
                assert.deepEqual(((outcome.details?.candidates ?? []) as Json[]).map((c) => c.artifact_id).sort(), [...same].sort());
            }
            for (const id of Object.values(ids).flat())
              assert.equal(await resolveArtifactRef(localLookup(ctx), id), id, 'an id always names itself');
          } finally {
            await ctx.content.close();
            await ctx.items.close();
          }
        },
      ),
      { numRuns: 15, seed: 20261202 },
    );
  });

  it('--version defaults to the version the command acts on, and the command says which it chose', async () => {
    const id = await create('chooser', ['--label', 'team=ops', '--label', 'env=prod']);
    await json(['artifact', 'version', 'chooser', '--file', file('v2.sh', 'echo v2\n')]);
    const proposed = await alp(['artifact', 'propose', id]);
    assert.equal(proposed.code, 0, proposed.stderr);
    assert.equal(proposed.stdout, `${id} v2 PROPOSED\n`);
    assert.match(proposed.stderr, new RegExp(`^alp: chose ${id} v2 \\(DRAFT\\): the latest version \\(--version not given\\)\n$`));

    // A DRAFT v3 after it: approve still targets the PROPOSED v2, not the latest.
    await json(['artifact', 'version', id, '--file', file('v3.sh', 'echo v3\n')]);
    const approved = await json(['artifact', 'approve', id, '--evidence', 'CR-7'], human);
    assert.equal((approved.version as Json).version, 2);
    assert.equal((approved.version as Json).state, 'APPROVED');
    assert.deepEqual(approved.chosen_version, { version: 2, state: 'PROPOSED', reason: 'the PROPOSED version (--version not given)' });

    // exec start picks the APPROVED one; stdout stays the run id alone (scripts capture it).
    const started = await alp(['exec', 'start', id]);
    assert.equal(started.code, 0, started.stderr);
    assert.match(started.stdout, /^[0-9A-HJKMNP-TV-Z]{26}\n$/);
    assert.match(started.stderr, /chose .* v2 \(APPROVED\): the APPROVED version/);
    const run = started.stdout.trim();
    await json(['exec', 'finish', run, '--status', 'FAILED', '--exit-code', '3']);

    // compensate picks the EXECUTED or FAILED one; given --version, nothing is chosen.
    const comp = await json(['compensate', id, '--file', file('undo.sh', 'echo undo\n')]);
    assert.equal((comp.compensated as Json).version, 2);
    assert.equal((comp.chosen_version as Json).state, 'FAILED');
    const got = await json(['artifact', 'get', id, '--version', '1', '--out', path.join(dir, 'v1.out')]);
    assert.equal(got.version, 1);
    assert.equal('chosen_version' in got, false);
    const latest = await json(['artifact', 'get', id, '--out', path.join(dir, 'latest.out')]);
    assert.deepEqual(latest.chosen_version, { version: 3, state: 'DRAFT', reason: 'the latest version (--version not given)' });

    // Nothing to approve: the latest is chosen and the service refuses it, naming it.
    const refused = await alp(['artifact', 'reject', id, '--evidence', 'x'], human);
    assert.equal(refused.code, 4, refused.stderr);
    assert.equal(refused.stderr.split('\n').filter(Boolean).length, 1, 'one error line, no note before it');
  });

  it('labels are shown by artifact show; exec show prints text without --json', async () => {
    const shown = await alp(['artifact', 'show', 'chooser']);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /^ {2}labels: env=prod, team=ops$/m);
    assert.match((await alp(['artifact', 'show', 'deploy'])).stdout, /^ {2}labels: none$/m);

    const id = await create('runner');
    await json(['artifact', 'propose', id]);
    await json(['artifact', 'approve', id, '--evidence', 'CR-8'], human);
    const run = String((await json(['exec', 'start', id])).run_id);
    await json(['exec', 'upload', run, 'stdout.log', '--file', file('out.log', 'hello\n')]);
    await json(['exec', 'finish', run, '--status', 'FAILED', '--exit-code', '137', '--signal', 'SIGKILL']);
    const text = await alp(['exec', 'show', run]);
    assert.equal(text.code, 0, text.stderr);
    assert.doesNotMatch(text.stdout, /^\{/, 'not JSON');
    assert.match(text.stdout, new RegExp(`^run ${run} {2}FAILED$`, 'm'));
    assert.match(text.stdout, /exit code: 137 {2}signal: SIGKILL/);
    assert.match(text.stdout, /started: {3}\S+ by os:/);
    assert.match(text.stdout, /finished: {2}\d{4}-/);
    assert.match(text.stdout, /stdout\.log +6 bytes {2}sha256:[0-9a-f]{64}/);
    assert.equal((await json(['exec', 'show', run])).status, 'FAILED', '--json is unchanged');
  });

  it('suggests the flag or command meant: --file/--filename mix-ups, typos, a subcommand under the wrong parent', async () => {
    const id = await create('mixup');
    // --file names the content to read; rollback-x.sql was meant as the recorded name.
    const missing = textError(await alp(['compensate', id, '--version', '1', '--file', 'rollback-x.sql']), 3, 'NOT_FOUND');
    assert.match(missing, /no such file: rollback-x\.sql .*--filename sets the name recorded/);
    // --filename alone: the content flag is missing, and the one given looks like it.
    const noFile = textError(await alp(['compensate', id, '--filename', 'rollback-x.sql']), 2, 'USAGE');
    assert.match(noFile, /required option '--file <path>' not specified \(--filename was given: did you mean --file\?\)/);
    // Typos (commander's suggestion) and longer forms of a known flag (ours).
    const f = file('mixup.sql', 'select 1;');
    assert.match(
      textError(await alp(['artifact', 'create', '--name', 'n', '--file', f, '--filenam', 'x']), 2, 'USAGE'),
      /Did you mean --filename\?/,
    );
    const upload = await alp(['exec', 'upload', '01ARZ3NDEKTSV4RRFFQ69G5FAV', 'stdout.log', '--file', f, '--filename', 'x']);
    assert.match(textError(upload, 2, 'USAGE'), /unknown option '--filename' \(did you mean --file\?\)/);
    // compensate and archive are top-level commands.
    assert.match(
      textError(await alp(['artifact', 'compensate', id]), 2, 'USAGE'),
      /unknown command 'compensate' \(did you mean alp compensate\?\)/,
    );
    assert.match(textError(await alp(['artifact', 'archive', id]), 2, 'USAGE'), /did you mean alp archive\?/);
  });

  it('archiving an archived artifact says "already archived" (CONFLICT, reason ALREADY_ARCHIVED)', async () => {
    const id = await create('settled');
    await json(['artifact', 'propose', id]);
    await json(['artifact', 'reject', id, '--evidence', 'CR-9'], human);
    const first = await json(['archive', 'settled'], human);
    assert.ok(Array.isArray(first.archived));
    const again = textError(await alp(['archive', id], human), 4, 'CONFLICT');
    assert.match(again, new RegExp(`artifact ${id} is already archived \\(since \\d{4}-`));
    const asJson = await alp(['archive', id, '--json'], human);
    assert.equal(JSON.parse(asJson.stderr).error.details.reason, 'ALREADY_ARCHIVED');
    assert.match((await alp(['artifact', 'show', id])).stdout, /archived \d{4}-/);
  });

  it('outside an installation a command is NOT_FOUND "no installation at …" and creates nothing; init creates one', async () => {
    const fresh = path.join(tempDir('alp-fresh'), 'nothing-here');
    for (const args of [
      ['artifact', 'list'],
      ['artifact', 'show', 'x'],
      ['token', 'create', '--principal', 'p', '--kind', 'agent'],
      ['audit', 'verify'],
    ]) {
      const line = textError(await captureCli([...args, '--data', fresh]), 3, 'NOT_FOUND');
      assert.ok(line.includes(`no installation at ${fresh}: run \`alp init\``), line);
      assert.equal(fs.existsSync(fresh), false, `${args.join(' ')} created nothing`);
    }
    const asJson = await captureCli(['artifact', 'list', '--data', fresh, '--json']);
    assert.equal(JSON.parse(asJson.stderr).error.details.reason, 'NO_INSTALLATION');
    // Storage URLs name the database instead of a directory.
    const db = path.join(fresh, 'meta.db');
    const byUrl = await captureCli(['artifact', 'list', '--metadata', `sqlite:${db}`, '--content', `file:${path.join(dir, 'c')}`]);
    assert.ok(textError(byUrl, 3, 'NOT_FOUND').includes(`no installation at sqlite:${db}`));
    // The default ./alp-data is not created where the command happens to run.
    const cwd = tempDir('alp-cwd');
    const r = await runAlp(['artifact', 'list'], { cwd });
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /^alp: NOT_FOUND: no installation at .*alp-data: /);
    assert.deepEqual(fs.readdirSync(cwd), []);
    assert.equal((await captureCli(['init', '--data', fresh])).code, 0);
    assert.equal((await captureCli(['artifact', 'list', '--data', fresh])).code, 0);
  });

  it('alp --help lists --version; alp alone prints the help on stderr and exits 2; a group alone too', async () => {
    const help = await captureCli(['--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^ {2}-V, --version +print the ALP version/m);
    assert.match((await captureCli(['--version'])).stdout, /^\d+\.\d+\.\d+\n$/);
    const bare = await runAlp([]);
    assert.equal(bare.code, 2);
    assert.equal(bare.stdout, '');
    assert.match(bare.stderr, /^Usage: alp \[options\] \[command\]/);
    assert.match(bare.stderr, /-V, --version/);
    const group = await captureCli(['artifact']);
    assert.equal(group.code, 2);
    assert.match(group.stderr, /^Usage: alp artifact/);
  });

  it('with --json an error is one JSON line on stderr with the exit code unchanged; without, one text line', async () => {
    const cases: Array<[string[], number, string]> = [
      [['artifact', 'show', 'no-such-artifact'], 3, 'NOT_FOUND'],
      [['artifact', 'list', '--limit', 'x'], 2, 'USAGE'],
      [['artifact', 'list', '--bogus'], 2, 'USAGE'],
      [['artifact', 'create', '--name', ' padded ', '--file', file('p.sh', 'x')], 2, 'INVALID'],
      [['artifact', 'approve', 'deploy', '--evidence', 'x', '--token', 'alp_unknownunknownunknownunknown'], 6, 'UNAUTHENTICATED'],
    ];
    for (const [args, exit, code] of cases) {
      const text = await alp(args);
      textError(text, exit, code);
      const r = await alp([...args, '--json']);
      assert.equal(r.code, exit, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      const lines = r.stderr.split('\n').filter(Boolean);
      assert.equal(lines.length, 1, r.stderr);
      const { error } = JSON.parse(lines[0] as string) as { error: Json };
      assert.equal(error.code, code);
      assert.equal(error.exit_code, exit);
      assert.equal(error.type, `urn:alp:problem:${code.toLowerCase()}`);
      assert.equal(typeof error.title, 'string');
      assert.equal(error.message, text.stderr.replace(/^alp: [A-Z_]+: /, '').trim());
      assert.equal(r.stderr.includes('alp_unknownunknown'), false, 'tokens stay redacted');
    }
    // "--json" given as another option's value is that value, not the output mode.
    const asValue = await alp(['artifact', 'list', '--state=--json']);
    textError(asValue, 2, 'INVALID');
    // The process itself (main.ts) prints the same.
    const proc = await runAlp(['artifact', 'show', 'no-such-artifact', '--data', data, '--json']);
    assert.equal(proc.code, 3);
    assert.equal(JSON.parse(proc.stderr).error.code, 'NOT_FOUND');
  });
});
