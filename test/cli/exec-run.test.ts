import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { alpFromSource } from '../helpers/cli-bundle.ts';
import { tempDir } from '../helpers/tmp.ts';

type Json = Record<string, unknown>;
type Outputs = Record<string, { digest: string; size: number }>;

const CHUNK = 64 * 1024;
const LOG_CHUNKS = 800; // 50 MiB
/** A node program writing `chunks` chunks of the pattern i % 251 to stdout, with backpressure. */
const logProgram = (chunks: number) => `const c=Buffer.alloc(${CHUNK});for(let i=0;i<c.length;i++)c[i]=i%251;let n=0;
function go(){while(n<${chunks}){n++;if(!process.stdout.write(c)){process.stdout.once('drain',go);return}}}go();
process.stderr.write('done\\n');require('fs').writeFileSync(process.argv[1],JSON.stringify({rows:42}))`;

function bigLogDigest(): string {
  const c = Buffer.alloc(CHUNK);
  for (let i = 0; i < c.length; i++) c[i] = i % 251;
  const h = createHash('sha256');
  for (let i = 0; i < LOG_CHUNKS; i++) h.update(c);
  return `sha256:${h.digest('hex')}`;
}

interface Spawned {
  code: number;
  stdoutDigest: string;
  stdoutBytes: number;
  stderr: string;
  /** The CLI process's peak resident set (VmHWM), as last read from /proc. */
  peakRssBytes: number;
}

/**
 * Runs the bundled CLI with stdout hashed as it arrives (never held), its peak RSS read from /proc
 * while it runs; `whenStdout` is called once with the process when its stdout first contains `marker`.
 */
function spawnAlp(args: string[], env: Json, opts: { marker?: string; whenStdout?: (pid: number) => void } = {}): Promise<Spawned> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...alpFromSource(), ...args], {
      env: { ...process.env, ALP_TOKEN: undefined, ALP_DATA: undefined, ALP_NOW: undefined, ...env } as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin.end();
    const hash = createHash('sha256');
    let bytes = 0;
    let seen = '';
    let signalled = false;
    child.stdout.on('data', (d: Buffer) => {
      hash.update(d);
      bytes += d.length;
      if (opts.marker && !signalled) {
        seen = (seen + d.toString('latin1')).slice(-1024);
        if (seen.includes(opts.marker)) {
          signalled = true;
          opts.whenStdout?.(child.pid as number);
        }
      }
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString('utf8');
    });
    let peakRssBytes = 0;
    const poll = setInterval(() => {
      try {
        const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (m) peakRssBytes = Math.max(peakRssBytes, Number(m[1]) * 1024);
      } catch {
        // exited between polls
      }
    }, 25);
    child.on('error', reject);
    child.on('close', (code) => {
      clearInterval(poll);
      resolve({ code: code ?? -1, stdoutDigest: `sha256:${hash.digest('hex')}`, stdoutBytes: bytes, stderr, peakRssBytes });
    });
  });
}

describe('alp exec run', () => {
  const dir = tempDir('alp-exec-run');
  const data = path.join(dir, 'd');
  let agent: Json = {};
  let human: Json = {};
  const alp = (args: string[], env: Json = agent) => alpJson([...args, '--data', data], { env: env as Record<string, string> });
  const show = async (run: string) => alp(['exec', 'show', run]);
  /** A new artifact whose version 1 is APPROVED. */
  const approved = async (): Promise<string> => {
    const file = path.join(dir, 'm.sql');
    fs.writeFileSync(file, 'select 1;');
    const id = (await alp(['artifact', 'create', '--name', `m-${Math.random().toString(36).slice(2)}`, '--file', file]))
      .artifact_id as string;
    await alp(['artifact', 'propose', id]);
    await alp(['artifact', 'approve', id, '--version', '1', '--evidence', 'CR-1'], human);
    return id;
  };
  const execRun = (id: string, command: string[], extra: string[] = []) => ['exec', 'run', id, '--data', data, ...extra, '--', ...command];

  before(async () => {
    await alpJson(['init', '--data', data]);
    human = { ALP_TOKEN: (await alpJson(['token', 'create', '--principal', 'alice', '--kind', 'human', '--data', data])).token };
    agent = { ALP_TOKEN: (await alpJson(['token', 'create', '--principal', 'bot', '--kind', 'agent', '--data', data])).token };
  });

  it('records a command writing 50 MiB of logs as SUCCEEDED, echoes it whole, with its output.json, in bounded memory', async () => {
    const id = await approved();
    const outFile = path.join(dir, 'out.json');
    const big = await spawnAlp(execRun(id, [process.execPath, '-e', logProgram(LOG_CHUNKS), outFile], ['--output-json', outFile]), agent);
    assert.equal(big.code, 0, big.stderr);
    assert.match(big.stderr, /^alp exec run: version 1 \(the APPROVED one\)$/m);
    const run = /run ([0-9A-Z]{26}) SUCCEEDED \(exit 0\)/.exec(big.stderr)?.[1];
    assert.ok(run, big.stderr);
    const expected = bigLogDigest();
    assert.equal(big.stdoutBytes, CHUNK * LOG_CHUNKS, 'the terminal saw every byte');
    assert.equal(big.stdoutDigest, expected);
    const e = await show(run);
    assert.equal(e.status, 'SUCCEEDED');
    assert.equal(e.exit_code, 0);
    const outputs = e.outputs as Outputs;
    assert.deepEqual(
      { size: outputs['stdout.log']?.size, digest: outputs['stdout.log']?.digest },
      { size: CHUNK * LOG_CHUNKS, digest: expected },
    );
    assert.equal(outputs['stderr.log']?.size, 'done\n'.length);
    assert.equal(outputs['output.json']?.size, JSON.stringify({ rows: 42 }).length);
    // The log never sits in memory: four times the log (200 MiB) peaks at about the same resident set.
    const huge = await spawnAlp(execRun(await approved(), [process.execPath, '-e', logProgram(4 * LOG_CHUNKS), outFile]), agent);
    assert.equal(huge.code, 0, huge.stderr);
    assert.equal(huge.stdoutBytes, 4 * CHUNK * LOG_CHUNKS);
    const growth = huge.peakRssBytes - big.peakRssBytes;
    assert.ok(big.peakRssBytes > 0 && growth < 50 * 1024 * 1024, `peak RSS ${huge.peakRssBytes} (200 MiB) vs ${big.peakRssBytes} (50 MiB)`);
  });

  it('a command killed by a signal: FAILED, the signal named, exit 128 + n', async () => {
    const id = await approved();
    const r = await runAlp(execRun(id, [process.execPath, '-e', "process.kill(process.pid, 'SIGKILL')"], ['--json']), {
      env: agent as Record<string, string>,
    });
    assert.equal(r.code, 128 + 9, r.stderr);
    const doc = JSON.parse(r.stdout) as Json;
    assert.equal(doc.status, 'FAILED');
    assert.equal(doc.exit_code, 137);
    assert.equal(doc.signal, 'SIGKILL');
    assert.match(r.stderr, /killed by SIGKILL \(exit code 137\)/);
    assert.ok(((doc.outputs as Outputs)['stderr.log']?.size ?? 0) > 0, 'the stderr log names the signal');
    assert.equal(((await alp(['artifact', 'show', id])).versions as Json[])[0]?.state, 'FAILED');
    // The signal is part of the stored run and of its finish record, not only of this command's output.
    const stored = await show(doc.run_id as string);
    assert.deepEqual(
      { status: stored.status, exit_code: stored.exit_code, signal: stored.signal },
      { status: 'FAILED', exit_code: 137, signal: 'SIGKILL' },
    );
    const verified = await runAlp(['audit', 'verify', id, '--data', data, '--json'], { env: human as Record<string, string> });
    assert.equal(verified.code, 0, verified.stdout + verified.stderr);
  });

  it('a non-zero exit: FAILED with that code; a missing --output-json file is said and the run still recorded', async () => {
    const id = await approved();
    const r = await runAlp(
      execRun(
        id,
        [process.execPath, '-e', "console.log('partial'); console.error('boom'); process.exit(3)"],
        ['--version', '1', '--output-json', path.join(dir, 'never-written.json')],
      ),
      { env: agent as Record<string, string> },
    );
    assert.equal(r.code, 3, r.stderr);
    assert.equal(r.stdout, 'partial\n', 'stdout is the command’s alone');
    assert.match(r.stderr, /^boom$/m);
    assert.match(r.stderr, /no output\.json recorded: .*never-written\.json does not exist/);
    const run = /run ([0-9A-Z]{26}) FAILED \(exit 3\)/.exec(r.stderr)?.[1] as string;
    const e = await show(run);
    assert.equal(e.status, 'FAILED');
    assert.equal(e.exit_code, 3);
    assert.deepEqual(Object.keys(e.outputs as Outputs).sort(), ['stderr.log', 'stdout.log']);
    assert.equal((e.outputs as Outputs)['stdout.log']?.size, 'partial\n'.length);
  });

  it('refuses a version that is not APPROVED, or whose approvals expired, before starting anything', async () => {
    const marker = path.join(dir, 'ran');
    const touch = [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`];
    const file = path.join(dir, 'd.sql');
    fs.writeFileSync(file, 'select 2;');
    const draft = (await alp(['artifact', 'create', '--name', 'draft-only', '--file', file])).artifact_id as string;
    const r = await runAlp(execRun(draft, touch), { env: agent as Record<string, string> });
    assert.equal(r.code, 4, r.stderr);
    assert.match(r.stderr, /^alp: ILLEGAL_TRANSITION: /m);
    assert.match(r.stderr, /version 1 \(the latest, DRAFT\)/);

    const expiring = await approved();
    // Past the approval's default 7 days (an agent may not move the clock: the operator, no token, runs it).
    const later = new Date(Date.now() + 8 * 24 * 3600 * 1000).toISOString();
    const asOperator = await runAlp(execRun(expiring, touch), { env: { ALP_NOW: later } });
    assert.equal(asOperator.code, 4, asOperator.stderr);
    assert.match(asOperator.stderr, /^alp: CONFLICT: version 1 no longer has 1 valid approval/m);
    assert.equal(fs.existsSync(marker), false, 'the command never ran');
    const runs = (await alp(['artifact', 'show', expiring])).versions as Json[];
    assert.equal(runs[0]?.state, 'APPROVED', 'nothing started');
  });

  it('forwards SIGINT to the command and records how it ended', async () => {
    const id = await approved();
    const program =
      "process.on('SIGINT', () => { console.log('interrupted'); process.exit(42) }); console.log('ready'); setInterval(() => {}, 1000)";
    const r = await spawnAlp(execRun(id, [process.execPath, '-e', program]), agent, {
      marker: 'ready',
      whenStdout: (pid) => process.kill(pid, 'SIGINT'),
    });
    assert.equal(r.code, 42, r.stderr);
    const run = /run ([0-9A-Z]{26}) FAILED \(exit 42\)/.exec(r.stderr)?.[1] as string;
    const e = await show(run);
    assert.equal(e.exit_code, 42);
    assert.equal((e.outputs as Outputs)['stdout.log']?.size, 'ready\ninterrupted\n'.length);

    const id2 = await approved();
    const term = await spawnAlp(execRun(id2, [process.execPath, '-e', "console.log('ready'); setInterval(() => {}, 1000)"]), agent, {
      marker: 'ready',
      whenStdout: (pid) => process.kill(pid, 'SIGTERM'),
    });
    assert.equal(term.code, 128 + 15, term.stderr);
    assert.match(term.stderr, /killed by SIGTERM \(exit code 143\)/);
    assert.match(term.stderr, /FAILED \(exit 143\)/);
  });
});
