/**
 * `npm run fuzz` — the HTTP fuzz campaign (issue 10, part 3): by default 100,000 hostile requests
 * (test/api/fuzz-requests.ts) over raw TCP on loopback to `alp start` in its own process, in batches,
 * with /healthz between batches and the server's RSS sampled every second.
 *
 * Asserts: no 5xx; every error is application/problem+json with a known code and no internal detail;
 * the server answers /healthz after every batch and exits 0 on SIGTERM; no token in any log line;
 * nothing written outside the data directory (every file of the sandbox around it is unchanged), and
 * inside it only the database and the content root, whose every file is a valid object key under a
 * known prefix (no traversal, no symlink, no temp file left after shutdown).
 *
 *   npm run fuzz -- [--requests 100000] [--concurrency 16] [--batch 5000] [--seed 20261130]
 *
 * Prints the figures and one `FUZZ_SUMMARY {json}` line; exits 1 on any failure.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { validateObjectKey } from '../src/core/object-keys.ts';
import { type FuzzFixtures, type FuzzRun, fuzzRequests, runFuzz } from '../test/api/fuzz-requests.ts';
import { flags, mib, rssBytes, runCliProcess, runMain, sampleRss, startAlpServer } from './alp-server.ts';

const f = flags(process.argv.slice(2));
const REQUESTS = Number(f.get('requests') ?? process.env.ALP_FUZZ_REQUESTS ?? 100_000);
const CONCURRENCY = Number(f.get('concurrency') ?? 16);
const BATCH = Number(f.get('batch') ?? 5000);
const SEED = Number(f.get('seed') ?? 20261130);
const MAX_UPLOAD = 256 * 1024;

function walkFiles(dir: string, skip: string | undefined, out = new Map<string, string>()): Map<string, string> {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (p === skip) continue;
    if (e.isSymbolicLink()) out.set(p, `symlink -> ${fs.readlinkSync(p)}`);
    else if (e.isDirectory()) {
      out.set(p, 'dir');
      walkFiles(p, skip, out);
    } else out.set(p, createHash('sha256').update(fs.readFileSync(p)).digest('hex'));
  }
  return out;
}

async function main(): Promise<number> {
  const sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'alp-fuzz-'));
  const data = path.join(sandbox, 'data');
  const cwd = path.join(sandbox, 'cwd');
  fs.mkdirSync(cwd);
  fs.mkdirSync(path.join(sandbox, 'canary', 'etc'), { recursive: true });
  fs.writeFileSync(path.join(sandbox, 'canary', 'etc', 'passwd'), 'root:x:0:0::/root:/bin/sh\n');
  fs.writeFileSync(path.join(sandbox, 'canary', 'win.ini'), '[fonts]\n');
  fs.writeFileSync(path.join(sandbox, 'package.json'), '{}\n');
  fs.mkdirSync(data);
  const before = walkFiles(sandbox, data);
  const failures: string[] = [];
  console.log(`fuzz: ${REQUESTS} requests, ${CONCURRENCY} connections, batches of ${BATCH}, seed ${SEED}; sandbox ${sandbox}`);

  const server = await startAlpServer({ cwd, args: ['--data', data, '--max-upload-bytes', String(MAX_UPLOAD), '--log-level', 'info'] });
  const port = Number(new URL(server.url).port);
  const tokenOf = (kind: string) => server.status.tokens.find((t) => t.kind === kind)?.token as string;
  const svc = await runCliProcess(['token', 'create', '--data', data, '--principal', 'fuzz-exporter', '--kind', 'service', '--json'], {
    cwd,
  });
  if (svc.code !== 0) throw new Error(`token create: ${svc.stderr}`);
  const tokens = { human: tokenOf('human'), agent: tokenOf('agent'), service: JSON.parse(svc.stdout).token as string };
  const call = async (method: string, p: string, token: string, body?: string | Record<string, unknown>) => {
    const init: RequestInit = { method, headers: { authorization: `Bearer ${token}` } };
    if (typeof body === 'string') init.body = body;
    else if (body) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)['content-type'] = 'application/json';
    }
    const r = await fetch(`${server.url}${p}`, init);
    const text = await r.text();
    if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const create = async (name: string) =>
    (await call('POST', `/v1/artifacts?name=${name}&filename=f.sh`, tokens.agent, `echo ${name}\n`)).artifact_id as string;
  const artifact = await create('fuzz');
  const proposed = await create('fuzz-p');
  await call('POST', `/v1/artifacts/${proposed}/versions/1/transitions`, tokens.agent, { to: 'PROPOSED' });
  const ran = await create('fuzz-r');
  await call('POST', `/v1/artifacts/${ran}/versions/1/transitions`, tokens.agent, { to: 'PROPOSED' });
  await call('POST', `/v1/artifacts/${ran}/versions/1/approvals`, tokens.human, { decision: 'APPROVE', evidence_ref: 'fuzz' });
  const run = (await call('POST', `/v1/artifacts/${ran}/versions/1/executions`, tokens.agent)).run_id as string;
  const fixtures: FuzzFixtures = { tokens, artifact, proposed, run };

  const rss = sampleRss(server.pid, 1000);
  const rssStart = rssBytes(server.pid);
  const result: FuzzRun = { requests: 0, statuses: new Map(), unanswered: 0, failures: [] };
  const started = performance.now();
  let healthChecks = 0;
  for (let done = 0, batch = 0; done < REQUESTS; batch++) {
    const n = Math.min(BATCH, REQUESTS - done);
    const requests = fuzzRequests(fixtures, n, SEED + batch * 7919);
    await runFuzz(port, requests, CONCURRENCY, result);
    done += n;
    const health = await fetch(`${server.url}/healthz`).then(
      (r) => r.status,
      (e: unknown) => String(e),
    );
    healthChecks++;
    if (health !== 200) {
      failures.push(`healthz after batch ${batch} (${done} requests): ${health}`);
      break;
    }
    const s = (performance.now() - started) / 1000;
    const fives = [...result.statuses].filter(([k]) => k >= 500).reduce((a, [, v]) => a + v, 0);
    console.log(
      `  ${String(done).padStart(7)} requests  ${(done / s).toFixed(0).padStart(5)} req/s  5xx ${fives}  failures ${result.failures.length}  RSS ${mib(rssBytes(server.pid))} MiB`,
    );
  }
  const seconds = (performance.now() - started) / 1000;
  const ready = await fetch(`${server.url}/readyz`).then((r) => r.status);
  if (ready !== 200) failures.push(`readyz after the campaign: ${ready}`);
  const shown = await fetch(`${server.url}/v1/artifacts/${artifact}`, { headers: { authorization: `Bearer ${tokens.service}` } }).then(
    (r) => r.status,
  );
  if (shown !== 200) failures.push(`the fixture artifact after the campaign: ${shown}`);
  const samples = rss.stop();
  const rssEnd = rssBytes(server.pid);
  const exit = await server.stop('SIGTERM');
  if (exit.code !== 0) failures.push(`alp start exited ${exit.code ?? exit.signal} on SIGTERM`);
  failures.push(...result.failures);

  // Nothing outside the data directory changed; inside it, only the database and the content root.
  const after = walkFiles(sandbox, data);
  for (const [p, h] of after)
    if (before.get(p) !== h) failures.push(`outside the data directory: ${p} ${before.has(p) ? 'changed' : 'appeared'}`);
  for (const p of before.keys()) if (!after.has(p)) failures.push(`outside the data directory: ${p} disappeared`);
  const allowedTop = new Set(['alp.db', 'alp.db-wal', 'alp.db-shm', 'content']);
  for (const name of fs.readdirSync(data)) if (!allowedTop.has(name)) failures.push(`unexpected entry in the data directory: ${name}`);
  const contentRoot = path.join(data, 'content');
  let objects = 0;
  for (const [p, kind] of walkFiles(contentRoot, undefined)) {
    if (kind === 'dir') continue;
    const key = path.relative(contentRoot, p).split(path.sep).join('/');
    if (kind.startsWith('symlink')) failures.push(`a symlink in the content root: ${key}`);
    if (!fs.realpathSync(p).startsWith(`${fs.realpathSync(contentRoot)}${path.sep}`)) failures.push(`outside the content root: ${p}`);
    try {
      validateObjectKey(key);
    } catch (e) {
      failures.push(`an invalid object key in the content root: ${JSON.stringify(key)} (${(e as Error).message})`);
    }
    if (!/^(artifacts|executions|provenance|history)\//.test(key)) failures.push(`an object under an unknown prefix: ${key}`);
    objects++;
  }

  // No token in any log line (the status line printed on a new installation carries the bootstrap tokens by design).
  const lines = server
    .stdout()
    .split('\n')
    .filter((l) => l.trim() && !(l.includes('"installation_id"') && l.includes('"tokens"')));
  const levels = new Map<number, number>();
  for (const l of lines) {
    try {
      const level = (JSON.parse(l) as { level?: number }).level ?? 0;
      levels.set(level, (levels.get(level) ?? 0) + 1);
    } catch {
      failures.push(`a log line that is not JSON: ${l.slice(0, 200)}`);
    }
    for (const t of Object.values(tokens)) if (l.includes(t)) failures.push(`a token in a log line: ${l.slice(0, 200)}`);
  }
  const errorLines = lines.filter((l) => /"level":(50|60)/.test(l));
  for (const l of errorLines.slice(0, 5)) failures.push(`an error-level log line: ${l.slice(0, 300)}`);

  const statuses = Object.fromEntries([...result.statuses].sort((a, b) => a[0] - b[0]));
  const fives = [...result.statuses].filter(([k]) => k >= 500).reduce((a, [, v]) => a + v, 0);
  const peak = Math.max(...samples.map(([, b]) => b));
  const summary = {
    requests: result.requests,
    seconds: Math.round(seconds),
    requests_per_s: Math.round(result.requests / seconds),
    concurrency: CONCURRENCY,
    seed: SEED,
    statuses,
    status_5xx: fives,
    unanswered_cut_or_blank: result.unanswered,
    health_checks: healthChecks,
    rss_mib: { start: Number(mib(rssStart)), peak: Number(mib(peak)), end: Number(mib(rssEnd)) },
    log_lines: lines.length,
    log_levels: Object.fromEntries(levels),
    objects_in_content_root: objects,
    failures: failures.length,
  };
  console.log('\n== HTTP fuzz');
  console.log(
    `  requests                 ${result.requests} in ${seconds.toFixed(0)} s (${summary.requests_per_s} req/s, ${CONCURRENCY} connections)`,
  );
  console.log(`  statuses                 ${JSON.stringify(statuses)}`);
  console.log(`  5xx                      ${fives}`);
  console.log(`  unanswered (cut short)   ${result.unanswered}`);
  console.log(`  healthz between batches  ${healthChecks} × 200`);
  console.log(`  server RSS               start ${mib(rssStart)} MiB, peak ${mib(peak)} MiB, end ${mib(rssEnd)} MiB`);
  console.log(`  content root             ${objects} objects, every key valid; nothing outside the data directory changed`);
  console.log(`  log lines                ${lines.length}, no token in any`);
  console.log(`  failures                 ${failures.length}`);
  for (const x of failures.slice(0, 30)) console.log(`    ${x.slice(0, 400)}`);
  console.log(`FUZZ_SUMMARY ${JSON.stringify(summary)}`);
  if (failures.length === 0) fs.rmSync(sandbox, { recursive: true, force: true });
  else {
    fs.writeFileSync(path.join(sandbox, 'server.log'), server.stdout());
    console.log(`  (sandbox and server.log kept for inspection: ${sandbox})`);
  }
  return failures.length === 0 ? 0 : 1;
}

runMain(main);
