/**
 * Issue 4 figures: the HTTP API with Node's fetch (keep-alive), 4 KiB, 1 MiB and 64 MiB blobs,
 * uploads (artifact creation, Repr-Digest sent) and verified downloads, one client and 4 concurrent
 * clients, against an `alp start` server in its own process. With the CNCF distribution registry
 * (Debian `docker-registry`, filesystem driver) on the same machine, the same client pushes
 * (monolithic: POST /v2/<name>/blobs/uploads/ then PUT ?digest=) and pulls the same sizes, and the
 * ratios are recorded against issue 18's goals (recordRatios). `scripts/bench-vs-registry.sh` installs the registry when it
 * is absent and runs this section with ALP_BENCH_REGISTRY=1 (then a missing registry is an error).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { benchDir, fmt, goal, header, row } from './util.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const root = path.resolve(import.meta.dirname, '..');

interface Workload {
  label: string;
  size: number;
  count: number;
}

interface Figures {
  blobsPerS: number;
  mbPerS: number;
}

interface Target {
  /** Uploads one blob; returns a handle for downloading it. */
  push(blob: Buffer, digest: string): Promise<string>;
  /** Downloads the blob and returns how many bytes arrived. */
  pull(handle: string): Promise<number>;
  stop(): Promise<void>;
}

export interface HttpBenchOptions {
  quick?: boolean;
  /** Compare with docker-registry: 'auto' when present, true to require it, false to skip. */
  registry?: boolean | 'auto';
}

export async function benchHttp(opts: HttpBenchOptions = {}): Promise<Record<string, number>> {
  const quick = opts.quick === true;
  const rounds = Number(process.env.ALP_BENCH_ROUNDS ?? (quick ? 1 : 2));
  const workloads: Workload[] = quick
    ? [
        { label: '4 KiB', size: 4 * KiB, count: 200 },
        { label: '1 MiB', size: MiB, count: 40 },
        { label: '64 MiB', size: 64 * MiB, count: 4 },
      ]
    : [
        { label: '4 KiB', size: 4 * KiB, count: 1000 },
        { label: '1 MiB', size: MiB, count: 300 },
        { label: '64 MiB', size: 64 * MiB, count: 8 },
      ];
  const wantRegistry = opts.registry ?? (process.env.ALP_BENCH_REGISTRY === '1' ? true : 'auto');
  const registryBin = findRegistry();
  if (wantRegistry === true && !registryBin) throw new Error('docker-registry is not installed (scripts/bench-vs-registry.sh installs it)');
  const dir = benchDir('http');
  const results: Record<string, number> = {};
  const names = ['alp', ...(registryBin && wantRegistry !== false ? ['registry'] : [])];
  header(
    `http: Node fetch (keep-alive), 1 and 4 concurrent clients, best of ${rounds} round(s); ALP uploads are artifact creations (every write fsynced), downloads are verified${
      names.length > 1 ? '; docker-registry 2.8.2 (filesystem driver) with the same client, measured alternately with ALP' : ''
    }`,
  );
  if (names.length === 1) console.log('  (docker-registry not found: run scripts/bench-vs-registry.sh for the side-by-side ratios)');
  const targets = new Map<string, Target>();
  const best = new Map<string, Figures>();
  const keep = (key: string, f: Figures) => {
    const prev = best.get(key);
    if (!prev || f.mbPerS > prev.mbPerS) best.set(key, f);
  };
  try {
    targets.set('alp', await startAlp(path.join(dir, 'alp')));
    if (names.includes('registry')) targets.set('registry', await startRegistry(registryBin as string, path.join(dir, 'registry')));
    for (const w of workloads) {
      for (const concurrency of [1, 4]) {
        // ALP and the registry take turns, so a noisy neighbour hits both alike; every round has new bytes.
        for (let round = 0; round < rounds; round++) {
          const blobs = makeBlobs(w, concurrency, round);
          for (const name of names) {
            const target = targets.get(name) as Target;
            const push = await run(w, concurrency, blobs, (b) => target.push(b.bytes, b.digest));
            const handles = push.handles;
            const pull = await run(w, concurrency, blobs, async (b) => {
              const n = await target.pull(handles[b.index] as string);
              if (n !== w.size) throw new Error(`${name}: pulled ${n} bytes of ${w.size}`);
              return '';
            });
            keep(`${name} ${w.label} c${concurrency} push`, push.figures);
            keep(`${name} ${w.label} c${concurrency} pull`, pull.figures);
          }
        }
        for (const name of names) {
          const verb = name === 'alp' ? ['upload', 'verified download'] : ['push', 'pull (unverified)'];
          const c = `${concurrency} client${concurrency > 1 ? 's' : ''}`;
          const push = best.get(`${name} ${w.label} c${concurrency} push`) as Figures;
          const pull = best.get(`${name} ${w.label} c${concurrency} pull`) as Figures;
          row(`${name} ${verb[0]} ${w.label} ×${w.count}, ${c}`, rate(w, push));
          row(`${name} ${verb[1]} ${w.label} ×${w.count}, ${c}`, rate(w, pull));
          results[`${name}_${w.size}_c${concurrency}_push_mbps`] = push.mbPerS;
          results[`${name}_${w.size}_c${concurrency}_pull_mbps`] = pull.mbPerS;
          results[`${name}_${w.size}_c${concurrency}_push_per_s`] = push.blobsPerS;
        }
      }
    }
    if (names.length > 1) recordRatios(workloads, best, results);
  } finally {
    for (const t of targets.values()) await t.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

/**
 * Issue 18's goals against the registry measured in the same run: 4 KiB uploads >= 3x its pushes
 * (blobs/s) with 1 and 4 clients; 1 MiB and 64 MiB uploads >= 1.5x (MB/s) with 1 client; a 64 MiB
 * verified download >= 1.0x its unverified pull with 1 client. The other ratios are reported.
 */
function recordRatios(workloads: Workload[], best: Map<string, Figures>, results: Record<string, number>): void {
  header('http: ALP ÷ docker-registry (issue 18 goals; the other ratios are reported)');
  for (const w of workloads) {
    for (const concurrency of [1, 4]) {
      const k = (n: string, op: string) => best.get(`${n} ${w.label} c${concurrency} ${op}`) as Figures;
      const small = w.size <= 4 * KiB;
      const unit = small ? 'blobs/s' : 'MB/s';
      const figure = (f: Figures) => (small ? f.blobsPerS : f.mbPerS);
      const up = figure(k('alp', 'push')) / figure(k('registry', 'push'));
      const down = k('alp', 'pull').mbPerS / k('registry', 'pull').mbPerS;
      const c = `${concurrency} client${concurrency > 1 ? 's' : ''}`;
      results[`ratio_${w.size}_c${concurrency}_push`] = up;
      results[`ratio_${w.size}_c${concurrency}_pull`] = down;
      const upGoal = small ? 3 : concurrency === 1 ? 1.5 : undefined;
      if (upGoal === undefined) row(`upload ${w.label}, ${c}`, `${fmt(up, 2)}x`, `${unit} (reported)`);
      else {
        goal({
          workload: `HTTP upload ${w.label}, ${c}, vs the registry's push`,
          goal: `>= ${upGoal}x ${unit}`,
          measured: `${fmt(up, 2)}x (${rate(w, k('alp', 'push'))})`,
          reference: `registry ${rate(w, k('registry', 'push'))}`,
          pass: up >= upGoal,
        });
      }
      if (w.size === 64 * MiB && concurrency === 1) {
        goal({
          workload: `HTTP verified download ${w.label}, ${c}, vs the registry's unverified pull`,
          goal: '>= 1.0x MB/s',
          measured: `${fmt(down, 2)}x (${rate(w, k('alp', 'pull'))})`,
          reference: `registry ${rate(w, k('registry', 'pull'))}`,
          pass: down >= 1,
        });
      } else row(`verified download ${w.label}, ${c}`, `${fmt(down, 2)}x`, 'MB/s (reported)');
    }
  }
}

function rate(w: Workload, f: Figures): string {
  return w.size <= 4 * KiB ? `${fmt(f.blobsPerS)} blobs/s` : `${fmt(f.mbPerS)} MB/s`;
}

interface Blob {
  index: number;
  bytes: Buffer;
  digest: string;
}

/**
 * Distinct content for every blob (a counter in the first bytes of a per-client random buffer), with
 * digests computed before the clock starts. Each client owns one buffer and rewrites its counter
 * between its own sequential requests.
 */
function makeBlobs(w: Workload, concurrency: number, round: number): { buffers: Buffer[]; digests: string[]; round: number } {
  const buffers = Array.from({ length: concurrency }, () => randomFillSync(Buffer.alloc(w.size)));
  const digests: string[] = [];
  for (let i = 0; i < w.count; i++) {
    const buf = buffers[i % concurrency] as Buffer;
    stamp(buf, i, round);
    digests.push(`sha256:${createHash('sha256').update(buf).digest('hex')}`);
  }
  return { buffers, digests, round };
}

function stamp(buf: Buffer, i: number, round: number): void {
  buf.writeUInt32BE(i, 0);
  buf.writeUInt32BE(round, 4);
}

async function run(
  w: Workload,
  concurrency: number,
  blobs: { buffers: Buffer[]; digests: string[]; round: number },
  op: (b: Blob) => Promise<string>,
): Promise<{ figures: Figures; handles: string[] }> {
  const handles: string[] = new Array(w.count);
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      const buf = blobs.buffers[worker] as Buffer;
      for (let i = worker; i < w.count; i += concurrency) {
        stamp(buf, i, blobs.round);
        handles[i] = await op({ index: i, bytes: buf, digest: blobs.digests[i] as string });
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { figures: { blobsPerS: w.count / seconds, mbPerS: (w.count * w.size) / MiB / seconds }, handles };
}

async function drain(res: Response): Promise<number> {
  let n = 0;
  if (!res.body) return 0;
  for await (const chunk of res.body) n += (chunk as Uint8Array).byteLength;
  return n;
}

function toStructured(digest: string): string {
  return `sha-256=:${Buffer.from(digest.slice(7), 'hex').toString('base64')}:`;
}

async function startAlp(data: string): Promise<Target> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/main.ts',
      'start',
      '--data',
      data,
      '--port',
      '0',
      '--json',
      '--log-level',
      'warn',
      '--max-upload-bytes',
      String(1024 * MiB),
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ALP_TOKEN: undefined } as NodeJS.ProcessEnv },
  );
  const status = await new Promise<{ url: string; tokens: Array<{ kind: string; token: string }> }>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
      for (const line of out.split('\n')) {
        if (!line.includes('"installation_id"')) continue;
        try {
          resolve(JSON.parse(line));
        } catch {
          // partial line
        }
      }
    });
    child.on('exit', (code) => reject(new Error(`alp start exited ${code}: ${out}`)));
  });
  child.stdout?.resume();
  const token = status.tokens.find((t) => t.kind === 'agent')?.token;
  if (!token) throw new Error('alp start printed no agent token (the bench needs a fresh data directory)');
  const auth = { authorization: `Bearer ${token}` };
  let n = 0;
  return {
    async push(blob, digest) {
      const res = await fetch(`${status.url}/v1/artifacts?name=bench-${n++}&filename=blob.bin`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/octet-stream', 'repr-digest': toStructured(digest) },
        body: blob as unknown as NonNullable<RequestInit['body']>,
      });
      const doc = (await res.json()) as { artifact_id?: string; detail?: string };
      if (res.status !== 201 || !doc.artifact_id) throw new Error(`alp upload: ${res.status} ${doc.detail}`);
      return doc.artifact_id;
    },
    async pull(id) {
      const res = await fetch(`${status.url}/v1/artifacts/${id}/versions/1/content`, { headers: auth });
      if (res.status !== 200) throw new Error(`alp download: ${res.status}`);
      return drain(res);
    },
    stop: () => stopChild(child),
  };
}

function findRegistry(): string | undefined {
  for (const p of ['/usr/bin/docker-registry', '/usr/local/bin/docker-registry']) if (fs.existsSync(p)) return p;
  const which = spawnSync('sh', ['-c', 'command -v docker-registry'], { encoding: 'utf8' });
  return which.status === 0 && which.stdout.trim() ? which.stdout.trim() : undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function startRegistry(bin: string, dir: string): Promise<Target> {
  fs.mkdirSync(path.join(dir, 'storage'), { recursive: true });
  const port = await freePort();
  const config = path.join(dir, 'config.yml');
  fs.writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  cache:',
      '    blobdescriptor: inmemory',
      '  filesystem:',
      `    rootdirectory: ${path.join(dir, 'storage')}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '',
    ].join('\n'),
  );
  const child = spawn(bin, ['serve', config], { stdio: ['ignore', 'ignore', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      const res = await fetch(`${base}/v2/`);
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // not yet
    }
    if (i > 200 || child.exitCode !== null) throw new Error('docker-registry did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  const repo = 'bench/blobs';
  return {
    async push(blob, digest) {
      const started = await fetch(`${base}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
      await started.arrayBuffer();
      const location = started.headers.get('location');
      if (started.status !== 202 || !location) throw new Error(`registry upload start: ${started.status}`);
      const url = new URL(location, base);
      url.searchParams.set('digest', digest);
      const res = await fetch(url, {
        method: 'PUT',
        headers: { 'content-type': 'application/octet-stream' },
        body: blob as unknown as NonNullable<RequestInit['body']>,
      });
      await res.arrayBuffer();
      if (res.status !== 201) throw new Error(`registry upload: ${res.status}`);
      return digest;
    },
    async pull(digest) {
      const res = await fetch(`${base}/v2/${repo}/blobs/${digest}`);
      if (res.status !== 200) throw new Error(`registry pull: ${res.status}`);
      return drain(res);
    },
    stop: () => stopChild(child),
  };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
