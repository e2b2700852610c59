/**
 * The CNCF distribution registry's offline GC (Debian docker-registry 2.8.2) on a storage tree of the
 * same object count as an ALP retention case: the filesystem driver's layout
 * (docker/registry/v2/blobs/sha256/xx/<hex>/data; repositories/<name>/_layers/sha256/<hex>/link;
 * repositories/<name>/_manifests/revisions/sha256/<hex>/link), half the blobs referenced by real
 * schema2 manifests (each manifest, its config and 8 layers are blobs), half orphans. `garbage-collect
 * --dry-run` marks (reads every manifest) and sweeps (walks every blob) without deleting; the real run
 * deletes on a copy. Blob bodies are 2 KiB like ALP's; GC never reads a layer's bytes.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const LAYERS_PER_MANIFEST = 8;
const M2 = 'application/vnd.docker.distribution.manifest.v2+json';

export function registryAvailable(): Promise<boolean> {
  return run('docker-registry', ['--version']).then(
    () => true,
    () => false,
  );
}

function hexOf(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

async function writeBlob(v2: string, body: Buffer): Promise<string> {
  const hex = hexOf(body);
  const dir = path.join(v2, 'blobs', 'sha256', hex.slice(0, 2), hex);
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(path.join(dir, 'data'), body);
  return hex;
}

async function link(dir: string, hex: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(path.join(dir, 'link'), `sha256:${hex}`);
}

/** One image: config + layers + a schema2 manifest naming them, linked in its repository. */
async function writeImage(v2: string, repo: string, layers: number, seed: number): Promise<number> {
  const repoDir = path.join(v2, 'repositories', repo);
  const blob = (i: number) =>
    Buffer.concat([Buffer.from(`image ${seed} blob ${i} `), randomBytes(16)])
      .toString('hex')
      .padEnd(2048, '-');
  const layerDescs = [];
  for (let i = 0; i < layers; i++) {
    const body = Buffer.from(blob(i));
    const hex = await writeBlob(v2, body);
    await link(path.join(repoDir, '_layers', 'sha256', hex), hex);
    layerDescs.push({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: body.length, digest: `sha256:${hex}` });
  }
  const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [] }, seed }));
  const configHex = await writeBlob(v2, config);
  await link(path.join(repoDir, '_layers', 'sha256', configHex), configHex);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: M2,
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: config.length, digest: `sha256:${configHex}` },
      layers: layerDescs,
    }),
  );
  const mHex = await writeBlob(v2, manifest);
  await link(path.join(repoDir, '_manifests', 'revisions', 'sha256', mHex), mHex);
  await link(path.join(repoDir, '_manifests', 'tags', `t${seed}`, 'current'), mHex);
  return layers + 2;
}

/** A storage tree of `objects` blobs, half referenced (manifests + configs + layers), half orphans. */
export async function buildRegistryTree(
  root: string,
  objects: number,
): Promise<{ referenced: number; orphans: number; manifests: number }> {
  const v2 = path.join(root, 'docker', 'registry', 'v2');
  let referenced = 0;
  let manifests = 0;
  const perImage = LAYERS_PER_MANIFEST + 2;
  while (referenced + perImage <= objects / 2) {
    referenced += await writeImage(v2, `bench/r${manifests % 100}`, LAYERS_PER_MANIFEST, manifests);
    manifests++;
  }
  const rest = Math.floor(objects / 2) - referenced;
  if (rest >= 3) {
    referenced += await writeImage(v2, 'bench/last', rest - 2, manifests);
    manifests++;
  }
  const orphans = objects - referenced;
  const batch = 64;
  for (let i = 0; i < orphans; i += batch) {
    await Promise.all(
      Array.from({ length: Math.min(batch, orphans - i) }, (_, j) => writeBlob(v2, Buffer.from(`orphan ${i + j} `.padEnd(2048, '.')))),
    );
  }
  return { referenced, orphans, manifests };
}

export async function registryConfig(root: string): Promise<string> {
  const file = path.join(root, 'config.yml');
  await fs.writeFile(
    file,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${root}`,
      'http:',
      '  addr: 127.0.0.1:0',
      '',
    ].join('\n'),
  );
  return file;
}

/** Runs the GC; returns wall time and how many blobs it says it would delete / deleted. */
export async function registryGc(config: string, dryRun: boolean): Promise<{ ms: number; eligible: number; marked: number }> {
  const start = process.hrtime.bigint();
  const { stdout, stderr } = await run('docker-registry', ['garbage-collect', ...(dryRun ? ['--dry-run'] : []), config], {
    maxBuffer: 1 << 30,
  });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const out = stdout + stderr;
  const eligible = Number(/(\d+) blobs and \d+ manifests eligible for deletion/.exec(out)?.[1] ?? Number.NaN);
  const marked = Number(/(\d+) blobs marked/.exec(out)?.[1] ?? Number.NaN);
  return { ms, eligible, marked };
}
