/**
 * The remote CLI (issue 19 A3, A5) against a real `alp start` process, the CLI in its own processes:
 * `exec run` with ALP_URL or a profile — a normal exit, a non-zero exit, a signal, Ctrl-C forwarded —
 * recorded by the server; operator commands refused with a usage error (exit 2) when given a server;
 * the profile file written 0600 and refused once others may read it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type ServerProcess, startServerProcess } from '../api/server-process.ts';
import { type CliResult, runAlp } from '../helpers/cli.ts';
import { alpFromSource } from '../helpers/cli-bundle.ts';
import { captureCli, clearCliEnv, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { tempDir } from '../helpers/tmp.ts';

type Json = Record<string, unknown>;

/** The one JSON error line a --json run printed on stderr. */
function jsonError(r: { stderr: string }): Json {
  const lines = r.stderr.split('\n').filter(Boolean);
  assert.equal(lines.length, 1, r.stderr);
  return (JSON.parse(lines[0] as string) as { error: Json }).error;
}

/** The CLI in its own process; `onStdout` sees its stdout as it arrives (to signal it at a marker). */
function spawnAlp(args: string[], env: Record<string, string>, onStdout: (text: string, pid: number) => void): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...alpFromSource(), ...args], {
      env: { ...process.env, ALP_TOKEN: undefined, ALP_URL: undefined, ALP_PROFILE: undefined, ...env } as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin.end();
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString('utf8');
      onStdout(stdout, child.pid as number);
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

describe('remote CLI: exec run, operator commands, profiles (issue 19 A3, A5)', () => {
  const dir = tempDir('alp-remote-ops');
  const data = path.join(dir, 'd');
  const config = path.join(dir, 'home', 'alp', 'config.json');
  let server: ServerProcess;
  let unpatch: () => void;
  let restoreEnv: () => void = () => {};
  let human = '';
  let agent = '';
  const viaUrl = () => ({ ALP_URL: server.url, ALP_TOKEN: agent });
  const remote = (args: string[], token = agent) => captureCli(['--server', server.url, '--token', token, ...args]);
  const rjson = async (args: string[], token = agent): Promise<Json> => {
    const r = await remote([...args, '--json'], token);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    return JSON.parse(r.stdout) as Json;
  };
  /** A new artifact whose version 1 is APPROVED (over HTTP). */
  const approved = async (): Promise<string> => {
    const file = path.join(dir, 'job.sh');
    fs.writeFileSync(file, 'echo job\n');
    const id = String(
      (await rjson(['artifact', 'create', '--name', `job-${Math.random().toString(36).slice(2)}`, '--file', file])).artifact_id,
    );
    await rjson(['artifact', 'propose', id]);
    await rjson(['artifact', 'approve', id, '--evidence', 'CR-1'], human);
    return id;
  };
  const execRun = (id: string, command: string[], extra: string[] = []) => ['exec', 'run', id, ...extra, '--', ...command];

  before(async () => {
    restoreEnv = clearCliEnv();
    server = await startServerProcess(data);
    human = server.status.tokens.find((t) => t.kind === 'human')?.token as string;
    agent = server.status.tokens.find((t) => t.kind === 'agent')?.token as string;
    unpatch = patchCliOutput();
  });
  after(async () => {
    unpatch?.();
    await server?.stop();
    restoreEnv();
  });

  it('writes the profile file 0600, uses it, and refuses it once others may read it', async () => {
    const env = { ALP_CONFIG: config, ALP_URL: server.url };
    const set = await runAlp(['profile', 'set', 'prod', '--token-stdin', '--json'], { env, input: `${agent}\n` });
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout), { file: config, profile: 'prod', server: server.url, token: true, mode: '0600' });
    assert.equal(fs.statSync(config).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.dirname(config)).mode & 0o777, 0o700);
    assert.equal(JSON.parse(fs.readFileSync(config, 'utf8')).profiles.prod.token, agent);
    const listed = await runAlp(['profile', 'list'], { env: { ALP_CONFIG: config } });
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(listed.stdout, `prod  ${server.url}  token\n`, 'never the token itself');

    // The profile gives the server and the token.
    const byProfile = await runAlp(['artifact', 'list', '--profile', 'prod', '--json'], { env: { ALP_CONFIG: config } });
    assert.equal(byProfile.code, 0, byProfile.stderr);
    assert.ok(Array.isArray((JSON.parse(byProfile.stdout) as Json).items));
    const unknown = await runAlp(['artifact', 'list', '--json'], { env: { ALP_CONFIG: config, ALP_PROFILE: 'staging' } });
    assert.equal(unknown.code, 3, unknown.stderr);
    assert.match(String(jsonError(unknown).message), /no profile "staging" in .*config\.json \(it has prod\)/);

    // Another server beside the profile never gets the profile's token.
    const seen: Array<string | undefined> = [];
    const spy = http.createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.writeHead(401, { 'content-type': 'application/problem+json' });
      res.end(JSON.stringify({ code: 'UNAUTHENTICATED', title: 'Unauthenticated', status: 401, detail: 'who are you' }));
    });
    await new Promise<void>((resolve) => spy.listen(0, '127.0.0.1', resolve));
    try {
      const other = `http://127.0.0.1:${(spy.address() as AddressInfo).port}`;
      const elsewhere = await runAlp(['artifact', 'list', '--profile', 'prod', '--server', other], { env: { ALP_CONFIG: config } });
      assert.equal(elsewhere.code, 6, elsewhere.stderr);
      assert.deepEqual(seen, [undefined], 'no Authorization header to a server that is not the profile’s');
    } finally {
      spy.close();
    }

    // Open to the group: refused, not read, with the fix.
    fs.chmodSync(config, 0o640);
    const open = await runAlp(['artifact', 'list', '--profile', 'prod'], { env: { ALP_CONFIG: config } });
    assert.equal(open.code, 2, open.stderr);
    assert.match(open.stderr, /^alp: USAGE: the config file .*config\.json is open to other users \(mode 0640\).*chmod 600/m);
    // Writing it again makes it private again.
    const again = await runAlp(['profile', 'set', 'prod', '--server', server.url], { env: { ALP_CONFIG: config } });
    assert.equal(again.code, 2, 'set reads the file first and refuses it too');
    fs.chmodSync(config, 0o600);
    assert.equal((await runAlp(['profile', 'remove', 'prod'], { env: { ALP_CONFIG: config } })).code, 0);
    assert.deepEqual(JSON.parse(fs.readFileSync(config, 'utf8')), { profiles: {} });
  });

  it('exec run over HTTP records a normal exit, a non-zero exit and a signal, and exits as the command did', async () => {
    // A normal exit, through a profile: logs and output.json uploaded, SUCCEEDED.
    const cfg = { ALP_CONFIG: path.join(dir, 'run-config.json') };
    const set = await runAlp(['profile', 'set', 'ci', '--server', server.url, '--token-stdin'], { env: cfg, input: agent });
    assert.equal(set.code, 0, set.stderr);
    const id = await approved();
    const outFile = path.join(dir, 'out.json');
    const program = `console.log('hello'); console.error('warn'); require('fs').writeFileSync(${JSON.stringify(outFile)}, '{"rows":3}')`;
    const okRun = await runAlp(execRun(id, [process.execPath, '-e', program], ['--output-json', outFile, '--json']), {
      env: { ...cfg, ALP_PROFILE: 'ci' },
    });
    assert.equal(okRun.code, 0, okRun.stderr);
    const e = JSON.parse(okRun.stdout) as Json;
    assert.deepEqual([e.status, e.exit_code, (e.chosen_version as Json).state], ['SUCCEEDED', 0, 'APPROVED']);
    const outputs = e.outputs as Record<string, { size: number }>;
    assert.deepEqual(
      [outputs['stdout.log']?.size, outputs['stderr.log']?.size, outputs['output.json']?.size],
      ['hello\n'.length, 'warn\n'.length, '{"rows":3}'.length],
    );
    assert.match(okRun.stderr, /^hello$/m, 'with --json the command’s stdout is echoed on stderr');

    // A non-zero exit: FAILED with that code, and this process exits with it.
    const failing = await runAlp(execRun(await approved(), [process.execPath, '-e', "console.log('partial'); process.exit(3)"]), {
      env: viaUrl(),
    });
    assert.equal(failing.code, 3, failing.stderr);
    assert.equal(failing.stdout, 'partial\n');
    const failedRun = /run ([0-9A-Z]{26}) FAILED \(exit 3\)/.exec(failing.stderr)?.[1] as string;
    assert.ok(failedRun, failing.stderr);
    const stored = await rjson(['exec', 'show', failedRun]);
    assert.deepEqual([stored.status, stored.exit_code], ['FAILED', 3]);

    // A signal: FAILED, the signal named in the run's record, exit 128 + 9.
    const killedId = await approved();
    const killed = await runAlp(execRun(killedId, [process.execPath, '-e', "process.kill(process.pid, 'SIGKILL')"], ['--json']), {
      env: viaUrl(),
    });
    assert.equal(killed.code, 137, killed.stderr);
    const k = JSON.parse(killed.stdout) as Json;
    assert.deepEqual([k.status, k.exit_code, k.signal], ['FAILED', 137, 'SIGKILL']);
    assert.deepEqual((await rjson(['exec', 'show', String(k.run_id)])).signal, 'SIGKILL');
    assert.equal(((await rjson(['artifact', 'show', killedId])).versions as Json[])[0]?.state, 'FAILED');

    // A version that is not APPROVED: refused by the server before anything runs (exit 4).
    const marker = path.join(dir, 'ran');
    const draft = String((await rjson(['artifact', 'create', '--name', 'draft-only', '--file', path.join(dir, 'job.sh')])).artifact_id);
    const refused = await runAlp(execRun(draft, [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`]), {
      env: viaUrl(),
    });
    assert.equal(refused.code, 4, refused.stderr);
    assert.match(refused.stderr, /^alp: ILLEGAL_TRANSITION: /m);
    assert.equal(fs.existsSync(marker), false, 'the command never ran');
  });

  it('exec run over HTTP forwards Ctrl-C to the command and still records how it ended', async () => {
    const id = await approved();
    const program =
      "process.on('SIGINT', () => { console.log('interrupted'); process.exit(42) }); console.log('ready'); setInterval(() => {}, 1000)";
    let sent = false;
    const r = await spawnAlp(execRun(id, [process.execPath, '-e', program]), viaUrl(), (text, pid) => {
      if (!sent && text.includes('ready')) {
        sent = true;
        process.kill(pid, 'SIGINT');
      }
    });
    assert.equal(r.code, 42, r.stderr);
    const run = /run ([0-9A-Z]{26}) FAILED \(exit 42\)/.exec(r.stderr)?.[1] as string;
    assert.ok(run, r.stderr);
    const e = await rjson(['exec', 'show', run]);
    assert.equal(e.exit_code, 42);
    assert.equal((e.outputs as Record<string, { size: number }>)['stdout.log']?.size, 'ready\ninterrupted\n'.length);
  });

  it('refuses operator commands given a server: a usage error (exit 2) that says they run only on the host', async () => {
    const backupDir = path.join(dir, 'backup');
    const operator: string[][] = [
      ['backup', '--out', backupDir],
      ['retention', 'status'],
      ['epoch', 'show'],
      ['token', 'create', '--principal', 'x', '--kind', 'agent'],
      ['audit', 'verify'],
      ['init'],
      ['serve'],
    ];
    for (const args of operator) {
      const what = `alp ${args.join(' ')}`;
      const r = await captureCli(['--server', server.url, '--token', human, ...args, '--json']);
      assert.equal(r.code, 2, `${what}: ${r.stderr}`);
      assert.equal(r.stdout, '', what);
      const error = jsonError(r);
      assert.equal(error.code, 'USAGE', what);
      assert.equal(error.exit_code, 2, what);
      assert.match(String(error.message), /is an operator command: it runs only on the installation's host, never over HTTP/, what);
      assert.deepEqual((error.details as Json).reason, 'LOCAL_ONLY', what);
    }
    assert.equal(fs.existsSync(backupDir), false, 'nothing was written');
    // The same from ALP_URL, in a process of its own, as text.
    const fromEnv = await runAlp(['backup', '--out', backupDir], { env: viaUrl() });
    assert.equal(fromEnv.code, 2, fromEnv.stderr);
    assert.match(fromEnv.stderr, /^alp: USAGE: alp backup is an operator command: .*\(it was given a server by ALP_URL\); unset ALP_URL/m);
    // verify --all is the whole installation's; one artifact is verified over HTTP.
    const all = await captureCli(['--server', server.url, '--token', human, 'verify', '--all']);
    assert.equal(all.code, 2, all.stderr);
    assert.match(all.stderr, /verify --all .* runs only on its host/);
    // A local storage option beside a server, or ALP_NOW (a local clock), is a usage error too.
    const both = await captureCli(['--server', server.url, '--data', data, 'artifact', 'list']);
    assert.equal(both.code, 2, both.stderr);
    assert.match(both.stderr, /--data names a local installation and --server a server: give one or the other/);
    const clock = await runAlp(['artifact', 'list'], { env: { ...viaUrl(), ALP_NOW: '2026-01-01T00:00:00Z' } });
    assert.equal(clock.code, 2, clock.stderr);
    assert.match(clock.stderr, /ALP_NOW moves the clock of a local installation only/);
    const badUrl = await captureCli(['--server', 'ftp://example.com', 'artifact', 'list']);
    assert.equal(badUrl.code, 2, badUrl.stderr);
  });
});
