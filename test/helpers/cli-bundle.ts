/**
 * The CLI from source, bundled once per test process. Spawning `node --import tsx src/cli/main.ts`
 * costs ~2.3 s of CPU per process (tsx's loader hooks resolve and transform ~400 modules on every
 * start); a CLI test file spawns dozens. Here the same source is bundled with esbuild (the transformer
 * tsx itself uses) on first use — one build of ~1 s per test process, from the working tree as it is at
 * that moment — and each spawn runs the one JavaScript file (~0.7 s of CPU, what `dist/` costs).
 *
 * What stays the same as running from source: every module under src/ (dependencies stay external,
 * resolved from node_modules), the fs listing worker (bundled beside the CLI as fs-walk-worker.js,
 * where src/content/fs/fs-walk.ts looks for it), and the web root (the bundle directory sits one level
 * under the repository, so src/api/web.ts's `../dist/web` is the repository's dist/web).
 * The child-process fixtures of the kill and race tests (test/fixtures/race-worker.ts, …) are
 * bundled the same way (`fromSource(file)`). `ALP_TEST_CLI=tsx` runs every such spawn through tsx as
 * before.
 */
import fs from 'node:fs';
import path from 'node:path';
import { buildSync } from 'esbuild';

const root = path.resolve(import.meta.dirname, '../..');
const tsxLoader = import.meta.resolve('tsx');
const PREFIX = '.alp-test-cli-';

const bundles = new Map<string, string>();

/** The node arguments that run the TypeScript file `entry` from source: `[...fromSource(f), ...args]`. */
export function fromSource(entry: string): string[] {
  if (process.env.ALP_TEST_CLI === 'tsx') return ['--import', tsxLoader, entry];
  let out = bundles.get(entry);
  if (!out) {
    out = bundle(entry, bundles.size);
    bundles.set(entry, out);
  }
  return [out];
}

/** The node arguments that start the CLI from source: `[...alpFromSource(), ...cliArgs]`. */
export function alpFromSource(): string[] {
  return fromSource(path.join(root, 'src/cli/main.ts'));
}

function bundle(entry: string, n: number): string {
  const modules = path.join(root, 'node_modules');
  if (n === 0) removeOrphans(modules);
  // Under node_modules/: bare imports resolve from the repository's node_modules, and the parent's
  // parent is the repository root (src/api/web.ts finds dist/web from there).
  const dir = path.join(modules, `${PREFIX}${process.pid}-${n}`);
  fs.rmSync(dir, { recursive: true, force: true });
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  buildSync({
    entryPoints: {
      main: entry,
      'fs-walk-worker': path.join(root, 'src/content/fs/fs-walk-worker.ts'),
    },
    outdir: dir,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    tsconfig: path.join(root, 'tsconfig.json'),
    logLevel: 'error',
  });
  return path.join(dir, 'main.js');
}

/** Bundles left by test processes that were killed before their exit handler ran. */
function removeOrphans(modules: string): void {
  for (const name of fs.readdirSync(modules)) {
    if (!name.startsWith(PREFIX)) continue;
    const pid = Number.parseInt(name.slice(PREFIX.length), 10);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') fs.rmSync(path.join(modules, name), { recursive: true, force: true });
    }
  }
}
