/**
 * `npm run soak` — load and soak (issue 10, part 4). `alp start` in its own process on loopback,
 * against the embedded profile (SQLite + a directory) and the distributed one (DynamoDB Local +
 * s3rver), with 8 concurrent clients (Node fetch, keep-alive) mixing, for 10 minutes per profile:
 *
 * - uploads (artifact creations with Repr-Digest) of 4 KiB – 64 MiB, mostly small, a few large (the
 *   8 MiB and 64 MiB ones are paced so the disk is not filled);
 * - verified downloads (the client hashes every byte and compares with the digest it uploaded);
 * - transitions (propose, withdraw), human approvals binding the content hash, executions (start,
 *   stdout.log and output.json uploads, finish), reads (show, history, list).
 *
 * Only conflicts (409: a version another client moved meanwhile) are allowed as errors. Prints, per
 * operation, throughput and p50/p99/max latency; errors by status and code; the server's RSS (and heap
 * in use, from its /metrics) sampled every 5 s, warm-up against steady state. Flat = the trend of the
 * per-minute floor (the lowest sample of each minute: in-flight 64 MiB transfers lift single samples)
 * stays under 2 MiB per minute, for the RSS and for the heap.
 *
 *   npm run soak -- [--profile embedded|distributed|both] [--seconds 600] [--clients 8] [--warmup 120]
 *   (ALP_SOAK_SECONDS shortens it too.) Exits 1 on any unexpected error, mismatch or memory growth.
 */
import { createHash, randomFillSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { distributedInstallation, stopDistributedServers } from '../test/helpers/distributed.ts';
import { flags, MiB, mib, rssBytes, runCliProcess, runMain, sampleRss, startAlpServer } from './alp-server.ts';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const f = flags(process.argv.slice(2));
const SECONDS = Number(f.get('seconds') ?? process.env.ALP_SOAK_SECONDS ?? 600);
const CLIENTS = Number(f.get('clients') ?? 8);
const WARMUP = Number(f.get('warmup') ?? Math.min(120, Math.round(SECONDS * 0.2)));
const PROFILES = (f.get('profile') ?? 'both') === 'both' ? ['embedded', 'distributed'] : [f.get('profile') as string];
const RSS_EVERY_MS = Number(f.get('rss-every-ms') ?? 5000);
/** Steady-state RSS trend allowed (MiB per minute). */
const FLAT_MIB_PER_MIN = Number(f.get('flat-mib-per-min') ?? 2);

const KiB = 1024;
/** Upload sizes by weight: mostly small, a few large; large ones paced per minute (all clients together). */
const SIZES: Array<{ size: number; weight: number; perMinute?: number }> = [
  { size: 4 * KiB, weight: 55 },
  { size: 64 * KiB, weight: 20 },
  { size: MiB, weight: 15 },
  { size: 8 * MiB, weight: 7, perMinute: 12 },
  { size: 64 * MiB, weight: 3, perMinute: 3 },
];
const OPS: Array<[Op, number]> = [
  ['upload', 24],
  ['download', 26],
  ['propose', 12],
  ['withdraw', 4],
  ['approve', 10],
  ['execute', 8],
  ['read', 16],
];
type Op = 'upload' | 'download' | 'propose' | 'withdraw' | 'approve' | 'execute' | 'read';

interface Known {
  id: string;
  digest: string;
  size: number;
  state: string;
}

class Stats {
  readonly latencies = new Map<string, number[]>();
  readonly bytes = new Map<string, number>();
  readonly errors = new Map<string, number>();
  readonly conflicts = new Map<string, number>();
  readonly unexpected: string[] = [];
  record(op: string, ms: number, bytes = 0): void {
    let l = this.latencies.get(op);
    if (!l) this.latencies.set(op, (l = []));
    l.push(ms);
    if (bytes) this.bytes.set(op, (this.bytes.get(op) ?? 0) + bytes);
  }
  error(op: string, status: number, code: string, detail: string): void {
    const key = `${op} ${status} ${code}`;
    if (status === 409) {
      this.conflicts.set(key, (this.conflicts.get(key) ?? 0) + 1);
      return;
    }
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1);
    if (this.unexpected.length < 20) this.unexpected.push(`${key}: ${detail.slice(0, 300)}`);
  }
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

/** The lowest sample of each minute: (minute midpoint ms, bytes). */
function floors(samples: Array<[number, number]>): Array<[number, number]> {
  const byMinute = new Map<number, number>();
  for (const [t, b] of samples) {
    const m = Math.floor(t / 60_000);
    byMinute.set(m, Math.min(byMinute.get(m) ?? Number.POSITIVE_INFINITY, b));
  }
  return [...byMinute].map(([m, b]) => [m * 60_000 + 30_000, b]);
}

/** Least-squares slope of (t ms, bytes) in MiB per minute. */
function slopeMiBPerMin(samples: Array<[number, number]>): number {
  const n = samples.length;
  if (n < 2) return 0;
  const mx = samples.reduce((a, [t]) => a + t, 0) / n;
  const my = samples.reduce((a, [, b]) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (const [t, b] of samples) {
    num += (t - mx) * (b - my);
    den += (t - mx) ** 2;
  }
  return den === 0 ? 0 : ((num / den) * 60_000) / MiB;
}

async function soak(profile: string): Promise<{ ok: boolean; summary: Record<string, unknown> }> {
  const sandbox = fs.mkdtempSync(path.join(os.tmpdir(), `alp-soak-${profile}-`));
  let args: string[];
  let env: Record<string, string> = {};
  let close = async () => {};
  if (profile === 'embedded') args = ['--data', path.join(sandbox, 'data')];
  else {
    const inst = await distributedInstallation();
    args = ['--metadata', inst.metadataUrl, '--content', inst.contentUrl];
    env = inst.env;
    close = () => inst.close();
  }
  const server = await startAlpServer({
    cwd: sandbox,
    args: [...args, '--max-upload-bytes', String(128 * MiB), '--log-level', 'info'],
    env,
  });
  const human = server.status.tokens.find((t) => t.kind === 'human')?.token as string;
  const agent = server.status.tokens.find((t) => t.kind === 'agent')?.token as string;
  const svc = await runCliProcess(['token', 'create', ...args, '--principal', 'soak-reader', '--kind', 'service', '--json'], {
    cwd: sandbox,
    env,
  });
  if (svc.code !== 0) throw new Error(`token create: ${svc.stderr}`);
  const service = JSON.parse(svc.stdout).token as string;
  const base = server.url;
  console.log(`\n== soak: ${profile}, ${CLIENTS} clients, ${SECONDS} s (warm-up ${WARMUP} s), server pid ${server.pid} at ${base}`);

  // One pool of random bytes; every upload is a slice made unique by its first 16 bytes.
  const pool = randomFillSync(Buffer.alloc(64 * MiB));
  let counter = 0;
  const known: Known[] = [];
  const byState = (s: string) => known.filter((k) => k.state === s);
  const pick = <T>(a: T[]): T | undefined => a[Math.floor(Math.random() * a.length)];
  const stats = new Stats();
  const pacing = new Map<number, number[]>();
  const paced = (size: number, perMinute: number) => {
    const now = Date.now();
    const recent = (pacing.get(size) ?? []).filter((t) => now - t < 60_000);
    pacing.set(size, recent);
    if (recent.length >= perMinute) return false;
    recent.push(now);
    return true;
  };
  const chooseSize = () => {
    const total = SIZES.reduce((a, s) => a + s.weight, 0);
    let r = Math.random() * total;
    for (const s of SIZES) {
      r -= s.weight;
      if (r <= 0) return s.perMinute === undefined || paced(s.size, s.perMinute) ? s.size : 4 * KiB;
    }
    return 4 * KiB;
  };
  const unique = (size: number): { body: Buffer; digest: string } => {
    const n = counter++;
    const start = (n * 4099) % (pool.length - size + 1);
    const body = Buffer.from(pool.subarray(start, start + size));
    body.writeUInt32BE(n, 0);
    body.writeUInt32BE(process.pid, 4);
    body.writeDoubleBE(Date.now(), 8);
    return { body, digest: `sha256:${createHash('sha256').update(body).digest('hex')}` };
  };
  const problem = async (r: Response) => {
    const text = await r.text();
    try {
      const p = JSON.parse(text) as { code?: string; detail?: string };
      return { code: p.code ?? '?', detail: p.detail ?? text };
    } catch {
      return { code: '?', detail: text };
    }
  };
  /** One timed request; resolves with the response (body consumed by `consume`) or undefined on error. */
  const timed = async <T>(
    op: string,
    go: () => Promise<Response>,
    consume: (r: Response) => Promise<T>,
    bytes = 0,
  ): Promise<T | undefined> => {
    const t0 = performance.now();
    let r: Response;
    try {
      r = await go();
    } catch (e) {
      stats.error(op, 0, 'NETWORK', String(e));
      return undefined;
    }
    if (r.status >= 300) {
      const p = await problem(r);
      stats.error(op, r.status, p.code, p.detail);
      return undefined;
    }
    const value = await consume(r);
    stats.record(op, performance.now() - t0, bytes);
    return value;
  };
  const json = (r: Response) => r.json() as Promise<Record<string, unknown>>;
  const auth = (t: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${t}`, ...extra });
  const post = (p: string, token: string, body: unknown) =>
    fetch(`${base}${p}`, { method: 'POST', headers: auth(token, { 'content-type': 'application/json' }), body: JSON.stringify(body) });
  const toRepr = (digest: string) => `sha-256=:${Buffer.from(digest.slice(7), 'hex').toString('base64')}:`;

  const ops: Record<Op, () => Promise<void>> = {
    async upload() {
      const size = chooseSize();
      const { body, digest } = unique(size);
      const v = await timed(
        `upload ${size >= MiB ? `${size / MiB} MiB` : `${size / KiB} KiB`}`,
        () =>
          fetch(`${base}/v1/artifacts?name=soak-${size}&filename=blob.bin&kind=report`, {
            method: 'POST',
            headers: auth(agent, { 'content-type': 'application/octet-stream', 'repr-digest': toRepr(digest) }),
            body,
          }),
        json,
        size,
      );
      if (!v) return;
      if (v.content_hash !== digest || v.size !== size)
        stats.unexpected.push(`upload: stored ${String(v.content_hash)} ${String(v.size)}, sent ${digest} ${size}`);
      known.push({ id: v.artifact_id as string, digest, size, state: 'DRAFT' });
    },
    async download() {
      const k = pick(known.slice(-5000));
      if (!k) return;
      const got = await timed(
        `download ${k.size >= MiB ? `${k.size / MiB} MiB` : `${k.size / KiB} KiB`}`,
        () => fetch(`${base}/v1/artifacts/${k.id}/versions/1/content`, { headers: auth(service) }),
        async (r) => {
          const hash = createHash('sha256');
          let n = 0;
          for await (const c of r.body as unknown as AsyncIterable<Uint8Array>) {
            hash.update(c);
            n += c.length;
          }
          return { digest: `sha256:${hash.digest('hex')}`, n };
        },
        k.size,
      );
      if (got && (got.digest !== k.digest || got.n !== k.size))
        stats.unexpected.push(`download ${k.id}: got ${got.digest} (${got.n} bytes), uploaded ${k.digest} (${k.size})`);
    },
    async propose() {
      const k = pick(byState('DRAFT'));
      if (!k) return;
      const v = await timed(
        'propose',
        () => post(`/v1/artifacts/${k.id}/versions/1/transitions`, agent, { to: 'PROPOSED', reason: 'soak' }),
        json,
      );
      k.state = v ? (v.state as string) : await refresh(k);
    },
    async withdraw() {
      const k = pick(byState('PROPOSED'));
      if (!k) return;
      const v = await timed(
        'withdraw',
        () => post(`/v1/artifacts/${k.id}/versions/1/transitions`, agent, { to: 'DRAFT', reason: 'soak' }),
        json,
      );
      k.state = v ? (v.state as string) : await refresh(k);
    },
    async approve() {
      const k = pick(byState('PROPOSED'));
      if (!k) return;
      const v = await timed(
        'approve',
        () =>
          post(`/v1/artifacts/${k.id}/versions/1/approvals`, human, {
            decision: 'APPROVE',
            evidence_ref: 'SOAK-1',
            expires_in: '1d',
            content_hash: k.digest,
          }),
        json,
      );
      k.state = v ? ((v.version as Record<string, unknown>).state as string) : await refresh(k);
    },
    async execute() {
      const k = pick(byState('APPROVED'));
      if (!k) return;
      k.state = 'EXECUTING';
      const e = await timed('exec start', () => post(`/v1/artifacts/${k.id}/versions/1/executions`, agent, {}), json);
      if (!e) {
        k.state = await refresh(k);
        return;
      }
      const run = e.run_id as string;
      const log = unique(Math.random() < 0.1 ? MiB : 4 * KiB);
      await timed(
        'exec upload',
        () =>
          fetch(`${base}/v1/executions/${run}/stdout.log`, {
            method: 'PUT',
            headers: auth(agent, { 'content-type': 'application/octet-stream', 'repr-digest': toRepr(log.digest) }),
            body: log.body,
          }),
        json,
        log.body.length,
      );
      await timed(
        'exec upload',
        () => fetch(`${base}/v1/executions/${run}/output.json`, { method: 'PUT', headers: auth(agent), body: '{"ok":true}' }),
        json,
        11,
      );
      const status = Math.random() < 0.8 ? 'SUCCEEDED' : 'FAILED';
      const done = await timed(
        'exec finish',
        () => post(`/v1/executions/${run}/finish`, agent, { status, exit_code: status === 'SUCCEEDED' ? 0 : 1 }),
        json,
      );
      k.state = done ? (status === 'SUCCEEDED' ? 'EXECUTED' : 'FAILED') : await refresh(k);
    },
    async read() {
      const k = pick(known);
      const r = Math.random();
      if (!k || r < 0.2) {
        await timed('read list', () => fetch(`${base}/v1/artifacts?state=PROPOSED&limit=50`, { headers: auth(service) }), json);
        return;
      }
      if (r < 0.6) await timed('read show', () => fetch(`${base}/v1/artifacts/${k.id}`, { headers: auth(service) }), json);
      else await timed('read history', () => fetch(`${base}/v1/artifacts/${k.id}/history`, { headers: auth(service) }), json);
    },
  };
  async function refresh(k: Known): Promise<string> {
    const v = await timed('read version', () => fetch(`${base}/v1/artifacts/${k.id}/versions/1`, { headers: auth(service) }), json);
    return v ? (v.state as string) : k.state;
  }
  const chooseOp = (): Op => {
    const total = OPS.reduce((a, [, w]) => a + w, 0);
    let r = Math.random() * total;
    for (const [op, w] of OPS) {
      r -= w;
      if (r <= 0) return op;
    }
    return 'read';
  };

  const started = performance.now();
  const rss = sampleRss(server.pid, RSS_EVERY_MS);
  // The V8 heap in use, from the server's own /metrics (prom-client's process metrics), on the same beat.
  const heap: Array<[number, number]> = [];
  const heapTimer = setInterval(() => {
    const t = performance.now() - started;
    fetch(`${base}/metrics`)
      .then((r) => r.text())
      .then((text) => {
        const m = /^nodejs_heap_size_used_bytes (\d+(?:\.\d+)?(?:e\+\d+)?)$/m.exec(text);
        if (m) heap.push([t, Number(m[1])]);
      })
      .catch(() => {});
  }, RSS_EVERY_MS);
  const deadline = started + SECONDS * 1000;
  let lastReport = started;
  const clients = Array.from({ length: CLIENTS }, async () => {
    while (performance.now() < deadline) {
      await ops[chooseOp()]().catch((e: unknown) => stats.unexpected.push(`client: ${String(e)}`));
      if (performance.now() - lastReport > 60_000) {
        lastReport = performance.now();
        const done = [...stats.latencies.values()].reduce((a, l) => a + l.length, 0);
        console.log(
          `  ${((lastReport - started) / 1000).toFixed(0).padStart(4)} s  ${done} requests  ${known.length} artifacts  RSS ${mib(rssBytes(server.pid))} MiB  errors ${[...stats.errors.values()].reduce((a, b) => a + b, 0)}`,
        );
      }
    }
  });
  await Promise.all(clients);
  const elapsed = (performance.now() - started) / 1000;
  const samples = rss.stop();
  clearInterval(heapTimer);
  // The server's own integrity failure counter, then a graceful stop.
  const metrics = await fetch(`${base}/metrics`).then((r) => r.text());
  const integrity = [...metrics.matchAll(/^alp_integrity_failures_total\{[^}]*\} (\d+)/gm)].reduce((a, m) => a + Number(m[1]), 0);
  const exit = await server.stop('SIGTERM');
  await close();
  const tokenLeaks = server
    .stdout()
    .split('\n')
    .filter((l) => !(l.includes('"installation_id"') && l.includes('"tokens"')))
    .filter((l) =>
      [human, agent, service, ...(env.AWS_SECRET_ACCESS_KEY ? [env.AWS_SECRET_ACCESS_KEY] : [])].some((t) => l.includes(t)),
    ).length;
  fs.rmSync(sandbox, { recursive: true, force: true });

  // Figures.
  const rows: Array<Record<string, unknown>> = [];
  let total = 0;
  for (const [op, l] of [...stats.latencies].sort((a, b) => a[0].localeCompare(b[0]))) {
    const sorted = [...l].sort((a, b) => a - b);
    total += l.length;
    const bytes = stats.bytes.get(op) ?? 0;
    rows.push({
      op,
      count: l.length,
      per_s: Number((l.length / elapsed).toFixed(2)),
      mb_per_s: bytes ? Number((bytes / MiB / elapsed).toFixed(2)) : undefined,
      p50_ms: Number(quantile(sorted, 0.5).toFixed(1)),
      p99_ms: Number(quantile(sorted, 0.99).toFixed(1)),
      max_ms: Number((sorted[sorted.length - 1] ?? 0).toFixed(1)),
    });
  }
  const warm = samples.filter(([t]) => t <= WARMUP * 1000);
  const steady = samples.filter(([t]) => t > WARMUP * 1000);
  const slope = slopeMiBPerMin(steady);
  // In-flight large uploads and downloads lift the RSS for a moment (buffers of up to ~3 MiB per
  // upload, S3 parts of 8 MiB); what a leak lifts is the floor. The trend is taken over the lowest
  // sample of each minute of the steady state, for the RSS and for the heap in use.
  const floorSlope = (series: Array<[number, number]>) => slopeMiBPerMin(floors(series.filter(([t]) => t > WARMUP * 1000)));
  const rssFloorSlope = floorSlope(samples);
  const heapFloorSlope = floorSlope(heap);
  const steadyBytes = steady.map(([, b]) => b);
  const steadyHeap = heap.filter(([t]) => t > WARMUP * 1000).map(([, b]) => b);
  const rssFig = {
    warmup_start: Number(mib(warm[0]?.[1] ?? 0)),
    warmup_end: Number(mib(warm[warm.length - 1]?.[1] ?? 0)),
    steady_min: Number(mib(Math.min(...steadyBytes))),
    steady_max: Number(mib(Math.max(...steadyBytes))),
    steady_end: Number(mib(steadyBytes[steadyBytes.length - 1] ?? 0)),
    steady_trend_mib_per_min: Number(slope.toFixed(2)),
    steady_floor_trend_mib_per_min: Number(rssFloorSlope.toFixed(2)),
    heap_steady_min: Number(mib(Math.min(...steadyHeap))),
    heap_steady_max: Number(mib(Math.max(...steadyHeap))),
    heap_floor_trend_mib_per_min: Number(heapFloorSlope.toFixed(2)),
    samples: samples.length,
    series: samples.map(([t, b]) => [Math.round(t / 1000), Number(mib(b))]),
    heap_series: heap.map(([t, b]) => [Math.round(t / 1000), Number(mib(b))]),
  };
  const flat = rssFloorSlope < FLAT_MIB_PER_MIN && heapFloorSlope < FLAT_MIB_PER_MIN;
  const errors = [...stats.errors.values()].reduce((a, b) => a + b, 0);
  const conflicts = [...stats.conflicts.values()].reduce((a, b) => a + b, 0);
  const ok = errors === 0 && stats.unexpected.length === 0 && integrity === 0 && exit.code === 0 && flat && tokenLeaks === 0;
  console.log(
    `\n  ${'operation'.padEnd(22)} ${'count'.padStart(7)} ${'ops/s'.padStart(8)} ${'MB/s'.padStart(7)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'max ms'.padStart(9)}`,
  );
  for (const r of rows)
    console.log(
      `  ${String(r.op).padEnd(22)} ${String(r.count).padStart(7)} ${String(r.per_s).padStart(8)} ${String(r.mb_per_s ?? '').padStart(7)} ${String(r.p50_ms).padStart(8)} ${String(r.p99_ms).padStart(8)} ${String(r.max_ms).padStart(9)}`,
    );
  console.log(`  all requests: ${total} in ${elapsed.toFixed(0)} s = ${(total / elapsed).toFixed(1)}/s; artifacts created ${known.length}`);
  console.log(`  conflicts (409, expected): ${conflicts} ${JSON.stringify(Object.fromEntries(stats.conflicts))}`);
  console.log(`  other errors: ${errors} ${JSON.stringify(Object.fromEntries(stats.errors))}`);
  for (const u of stats.unexpected.slice(0, 10)) console.log(`    ${u}`);
  console.log(
    `  integrity failures counted by the server: ${integrity}; token or secret in a log line: ${tokenLeaks}; exit on SIGTERM: ${exit.code ?? exit.signal}`,
  );
  console.log(
    `  server RSS: warm-up ${rssFig.warmup_start} → ${rssFig.warmup_end} MiB; steady state ${rssFig.steady_min}–${rssFig.steady_max} MiB (end ${rssFig.steady_end}) over ${steady.length} samples; trend of every sample ${rssFig.steady_trend_mib_per_min} MiB/min, of the per-minute floor ${rssFig.steady_floor_trend_mib_per_min} MiB/min`,
  );
  console.log(
    `  server heap in use: steady state ${rssFig.heap_steady_min}–${rssFig.heap_steady_max} MiB, per-minute floor trend ${rssFig.heap_floor_trend_mib_per_min} MiB/min: ${flat ? 'flat' : 'GROWING'}`,
  );
  console.log(`  verdict: ${ok ? 'PASS' : 'FAIL'}`);
  const summary = {
    profile,
    seconds: Math.round(elapsed),
    clients: CLIENTS,
    requests: total,
    requests_per_s: Number((total / elapsed).toFixed(1)),
    artifacts: known.length,
    operations: rows,
    conflicts,
    errors,
    unexpected: stats.unexpected.length,
    integrity_failures: integrity,
    rss_mib: rssFig,
    flat,
    ok,
  };
  console.log(`SOAK_SUMMARY ${JSON.stringify(summary)}`);
  return { ok, summary };
}

async function main(): Promise<number> {
  let ok = true;
  try {
    for (const p of PROFILES) {
      if (p !== 'embedded' && p !== 'distributed') throw new Error(`--profile is embedded, distributed or both, got ${p}`);
      ok = (await soak(p)).ok && ok;
    }
  } finally {
    await stopDistributedServers();
  }
  return ok ? 0 : 1;
}

runMain(main);
