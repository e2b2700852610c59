/**
 * Issue 17 B14, "The seed's API shape is importable": `import { ArtifactRetention, TelemetryQueue } from
 * 'alp'` from a project that has the package installed from `npm pack`, constructed the seed's way
 * (`new ArtifactRetention(database, artifactRoot)`, `new TelemetryQueue(database)`) on a temporary
 * installation; and `npm pack` ships only what runs.
 *
 * How: the library is compiled once (tsc -p tsconfig.build.json, declarations included) into a staging
 * copy of the package (package.json, README.md, dist/ — the web UI bundle, a vite build, is not made
 * here), packed with `npm pack --ignore-scripts`, and the tarball is unpacked into a temporary
 * project's node_modules/alp. Its dependencies are this checkout's node_modules, linked (the machine
 * has no registry to install them from); everything of ALP itself comes from the tarball.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { tempDir } from './helpers/tmp.ts';

const root = path.resolve(import.meta.dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const SHIPPED = /^(dist\/|README\.md$|LICENSE|package\.json$)/;

function packList(cwd: string, extra: string[] = []): { filename: string; files: string[] } {
  const out = execFileSync('npm', ['pack', '--json', '--ignore-scripts', ...extra], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const [report] = JSON.parse(out) as Array<{ filename: string; files: Array<{ path: string }> }>;
  assert.ok(report);
  return { filename: report.filename, files: report.files.map((f) => f.path) };
}

function run(cwd: string, cmd: string, args: string[]): string {
  return execFileSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
}

const SEED_WAY = `
import path from 'node:path';
import { ArtifactRetention, TelemetryQueue } from 'alp';
const database = path.resolve('data/alp.db');
const artifactRoot = path.resolve('data/content');
// A host written the seed's way: withMaintenance(epoch, fn) calls fn() with no argument.
let withMaintenance = 0;
const trustedHost = { withMaintenance: (epoch, fn) => (withMaintenance++, fn()), pins: () => [], approve: async () => undefined };
const retention = new ArtifactRetention(database, artifactRoot);
let result;
try {
  result = await retention.run(1, 'QUARANTINE', trustedHost, { maxArtifacts: 100 });
} finally {
  await retention.close();
}
const telemetry = new TelemetryQueue(database);
let queue;
try {
  const enqueued = await telemetry.enqueue('host:1', { hello: 'world' }, new Date());
  const batch = await telemetry.claim(1, 'host-exporter', new Date(), { maxRecords: 100, maxBytes: 1024 * 1024, leaseMs: 30_000 });
  for (const record of batch) {
    await telemetry.acknowledge(1, 'host-exporter', record.id, record.leaseToken, new Date().toISOString());
  }
  queue = { enqueued: enqueued.status, claimed: batch.map((r) => r.id), counters: await telemetry.counters() };
} finally {
  await telemetry.close();
}
console.log(JSON.stringify({ status: result.status, observed: result.observed, withMaintenance, ...queue }));
`;

const TYPED = `
import { ArtifactRetention, type RetentionHost, type RetentionPlanResult, type RetentionResult, TelemetryQueue, type ClaimedRecord, openInstallation } from 'alp';
const host: RetentionHost = { withMaintenance: (_epoch, fn) => fn(), pins: () => [], approve: async () => undefined };
const retention = new ArtifactRetention('data/alp.db', 'data/content');
const result: Promise<RetentionResult> = retention.run(1, 'QUARANTINE', host, { maxArtifacts: 100 });
const batch: Promise<ClaimedRecord[]> = new TelemetryQueue('data/alp.db').claim(1, 'host-exporter', new Date());
const plan: Promise<RetentionPlanResult> = retention.plan(1, 'QUARANTINE', { maxArtifacts: 100 });
void result; void batch; void plan; void openInstallation;
import { AlpClient, AlpHttpError, IntegrityError, type Version, type Execution } from 'alp/client';
import { createNodeClient, fileBody } from 'alp/client/node';
const client = new AlpClient({ url: 'http://127.0.0.1:1', token: 'alp_x' });
const created: Promise<Version> = client.createArtifact({ name: 'n', filename: 'f', labels: { a: 'b' } }, 'text');
const run: Promise<Execution> = createNodeClient({ url: 'http://127.0.0.1:1' }).startExecution('id', 1);
const state: Version['state'] = 'PROPOSED';
void created; void run; void state; void fileBody; void AlpHttpError; void IntegrityError;
`;

/** alp/client from the tarball: constructed, and its re-hash refusing wrong bytes (no server needed). */
const CLIENT_WAY = `
const { AlpClient, IntegrityError } = await import('alp/client');
const { createNodeClient } = await import('alp/client/node');
const body = 'hello';
const digest = 'sha-256=:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:';
const answer = (text) => async () => new Response(text, { headers: { 'repr-digest': digest, 'content-length': String(text.length) } });
const good = await (await new AlpClient({ url: 'http://alp.invalid', fetch: answer(body) }).getContent('A', 1)).text();
let refused = false;
try {
  await (await createNodeClient({ url: 'http://alp.invalid', fetch: answer('hellO') }).getContent('A', 1)).text();
} catch (e) {
  refused = e instanceof IntegrityError && e.code === 'INTEGRITY';
}
console.log(JSON.stringify({ good, refused }));
`;

/** Every module dist/client/index.js reaches, by its static imports (relative ones followed). */
function importGraph(entry: string): { files: string[]; external: string[] } {
  const files = new Set<string>();
  const external = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const text = fs.readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g)) {
      const spec = (m[1] ?? m[2]) as string;
      if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec));
      else external.add(spec);
    }
  };
  visit(entry);
  return { files: [...files], external: [...external] };
}

describe('the package (issue 17 B14)', () => {
  let tarball: string;
  let staged: string[];
  before(() => {
    const stage = tempDir('alp-pack-stage');
    run(root, path.join(root, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.build.json', '--outDir', path.join(stage, 'dist')]);
    for (const f of ['package.json', 'README.md']) fs.copyFileSync(path.join(root, f), path.join(stage, f));
    const out = tempDir('alp-pack-out');
    const packed = packList(stage, ['--pack-destination', out]);
    tarball = path.join(out, packed.filename);
    staged = packed.files;
  });

  it('package.json: exports with types, the bin and the files that ship', () => {
    assert.deepEqual(pkg.exports['.'], { types: './dist/index.d.ts', import: './dist/index.js' });
    assert.deepEqual(pkg.exports['./client'], { types: './dist/client/index.d.ts', import: './dist/client/index.js' });
    assert.deepEqual(pkg.exports['./client/node'], { types: './dist/client/node.d.ts', import: './dist/client/node.js' });
    assert.equal(pkg.types, './dist/index.d.ts');
    assert.ok(fs.existsSync(path.join(root, 'src/index.ts')), 'dist/index.js is built from src/index.ts');
    assert.equal(pkg.bin.alp, 'dist/cli/main.js');
    assert.match(pkg.scripts['test:retention'], /run-tests\.mjs .*test\/retention.*test\/telemetry/);
  });

  it('npm pack ships only what runs: dist (no source maps), README, package.json — no src, test, bench, docs, scripts', () => {
    // From the checkout itself (src, test, bench, docs and scripts all present beside it).
    const here = packList(root, ['--dry-run']).files;
    const stray = here.filter((f) => !SHIPPED.test(f) || f.endsWith('.map'));
    assert.deepEqual(stray, [], 'files outside dist/README/package.json would ship');
    // From the staged build: the library, its declarations and the CLI.
    for (const f of [
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli/main.js',
      'dist/retention/retention.d.ts',
      'dist/client/index.js',
      'dist/client/index.d.ts',
      'dist/client/node.js',
      'package.json',
      'README.md',
    ]) {
      assert.ok(staged.includes(f), `${f} ships`);
    }
    assert.deepEqual(
      staged.filter((f) => !SHIPPED.test(f) || f.endsWith('.map') || /^(src|test|bench|docs|scripts)\//.test(f)),
      [],
    );
  });

  it("import { ArtifactRetention, TelemetryQueue } from 'alp' — constructed the seed's way on a temporary installation, and typed", () => {
    const project = tempDir('alp-consumer');
    const dir = path.join(project, 'node_modules', 'alp');
    fs.mkdirSync(dir, { recursive: true });
    run(project, 'tar', ['-xzf', tarball, '-C', dir, '--strip-components=1']);
    fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
    fs.writeFileSync(path.join(project, 'package.json'), '{"type":"module","private":true}\n');
    // An installation made by the packed CLI.
    run(project, process.execPath, [path.join(dir, 'dist/cli/main.js'), 'init', '--data', 'data']);
    // An object nothing names (bytes left by a crash): the run observes it (before any fence: issue 17 item 3).
    const orphan = path.join(project, 'data/content/artifacts/orphan/v1/left-behind.bin');
    fs.mkdirSync(path.dirname(orphan), { recursive: true });
    fs.writeFileSync(orphan, 'nobody names these bytes');
    fs.writeFileSync(path.join(project, 'seed.mjs'), SEED_WAY);
    const r = JSON.parse(run(project, process.execPath, ['seed.mjs']).trim().split('\n').at(-1) as string);
    assert.equal(r.status, 'NOTHING_TO_DO', JSON.stringify(r)); // nothing is due yet: the grace starts now
    assert.deepEqual(r.observed, ['artifacts/orphan/v1/left-behind.bin'], 'its grace period started');
    // Grace starts decide nothing and commit as ordinary fenced writes: with nothing due, no fence is
    // taken (the seed-style host's fn() path is covered by test/retention/run-api and run-short-fence).
    assert.equal(r.withMaintenance, 0, "an observe-only run does not call the host's withMaintenance");
    assert.equal(r.enqueued, 'accepted');
    assert.deepEqual(r.claimed, ['host:1']);
    assert.equal(r.counters.delivered, 1);
    assert.equal(r.counters.live_records, 0);

    // The declarations: a TypeScript consumer (strict, NodeNext, library files checked) compiles.
    fs.writeFileSync(path.join(project, 'typed.ts'), TYPED);
    const tsconfig = {
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: ['node'],
        typeRoots: [path.join(root, 'node_modules/@types')],
      },
      files: ['typed.ts'],
    };
    fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
    run(project, path.join(root, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.json']);

    // alp/client: importable from the tarball, verifying what it reads.
    fs.writeFileSync(path.join(project, 'client.mjs'), CLIENT_WAY);
    const c = JSON.parse(run(project, process.execPath, ['client.mjs']).trim().split('\n').at(-1) as string);
    assert.deepEqual(c, { good: 'hello', refused: true });
    // Browser-safe: nothing alp/client reaches imports Node (node.js is the separate alp/client/node).
    const graph = importGraph(path.join(dir, 'dist/client/index.js'));
    assert.deepEqual(
      graph.external.filter((s) => s.startsWith('node:') || !/^@sinclair\/typebox/.test(s)),
      [],
      `alp/client imports only ALP's own browser-safe modules (and TypeBox): ${graph.files.map((f) => path.relative(dir, f)).join(', ')}`,
    );
  });
});
