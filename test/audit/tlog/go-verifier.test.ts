/**
 * Third-party verification of the transparency log (issue 20 "Must show"): Go's
 * golang.org/x/mod/sumdb/note and sumdb/tlog (Debian's golang-go + golang-golang-x-mod-dev, built
 * offline) check what ALP produces — test/audit/tlog/go-verifier/main.go shares no code with ALP.
 *
 * - note.Open verifies ALP's signed checkpoint under ALP's verifier key, and Go signing the same text
 *   with the same key gives the same note byte for byte;
 * - tlog recomputes every root of 1..300 records itself, checks ALP's inclusion and consistency proofs
 *   (CheckRecord, CheckTree) for random sizes, and its own proofs (ProveRecord, ProveTree) are ALP's;
 * - ALP's tiles are tlog's tiles (ReadTileData), paths included;
 * - a flipped bit in a proof, a root, a record or a signature is refused by Go.
 *
 * Go must be installed (CI's .ci/run installs it): without it these tests fail, they do not skip.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, createPrivateKey, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { formatCheckpointBody, signCheckpoint } from '../../../src/audit/tlog/checkpoint.ts';
import { acquireLease } from '../../../src/audit/tlog/lease.ts';
import { auditLeafHash, type Hash } from '../../../src/audit/tlog/merkle.ts';
import { keyHash, verifierKey } from '../../../src/audit/tlog/note.ts';
import { contentTileReader, readLeafEntries } from '../../../src/audit/tlog/objects.ts';
import { runRound } from '../../../src/audit/tlog/sequencer.ts';
import { readLogState } from '../../../src/audit/tlog/state.ts';
import { appendLeaves, TiledTree, tilePath, tilesOf } from '../../../src/audit/tlog/tiles.ts';
import type { Digest } from '../../../src/core/digest.ts';
import { addVersion, createArtifact } from '../../../src/lifecycle/artifacts.ts';
import { propose } from '../../../src/lifecycle/transitions.ts';
import { attachAuditSinks } from '../../../src/runtime/sinks.ts';
import { initInstallation } from '../../../src/system/installation.ts';
import { installationSigner } from '../../../src/system/installation-key.ts';
import { keySigner, openFileSigner } from '../../../src/system/signing-key.ts';
import { embeddedContext } from '../../helpers/context.ts';
import { bytesOf, tempDir } from '../../helpers/tmp.ts';
import { agent } from '../../helpers/walk.ts';
import { MemoryTiles } from './memory-tiles.ts';

const GO_SOURCE = path.resolve(import.meta.dirname, 'go-verifier');
const GO_PATH = '/usr/share/gocode';
const X_MOD = path.join(GO_PATH, 'src/golang.org/x/mod/sumdb');
const INSTALL = 'apt-get install -y golang-go golang-golang-x-mod-dev (.ci/run installs them)';

let binary: string | undefined;

/** Builds the Go verifier once per test file; fails (never skips) without Go or x/mod. */
function goVerifier(): string {
  if (binary) return binary;
  const version = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (version.error || version.status !== 0)
    throw new Error(`the Go toolchain is missing (go version: ${version.error?.message ?? version.stderr}): ${INSTALL}`);
  if (!fs.existsSync(path.join(X_MOD, 'note')) || !fs.existsSync(path.join(X_MOD, 'tlog')))
    throw new Error(`golang.org/x/mod/sumdb is not in ${GO_PATH}: ${INSTALL}`);
  const dir = tempDir('alp-go-verifier');
  const out = path.join(dir, 'alp-tlog-verify');
  const build = spawnSync('go', ['build', '-o', out, 'main.go'], {
    cwd: GO_SOURCE,
    encoding: 'utf8',
    env: { ...process.env, GOPATH: GO_PATH, GO111MODULE: 'off', GOCACHE: path.join(dir, 'cache'), GOFLAGS: '', CGO_ENABLED: '0' },
  });
  if (build.status !== 0) throw new Error(`go build of ${GO_SOURCE} failed: ${build.stderr}`);
  binary = out;
  return out;
}

interface GoResult {
  id: string;
  ok: boolean;
  error?: string;
  same_as_go: boolean;
  text?: string;
  origin?: string;
  size?: number;
  root?: string;
  go_path?: string;
  go_signed?: string;
}

function runGo(request: Record<string, unknown>): Map<string, GoResult> {
  const stdout = execFileSync(goVerifier(), [], {
    input: JSON.stringify({ records: RECORDS_HEX, ...request }),
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const { results } = JSON.parse(stdout) as { results: GoResult[] };
  return new Map(results.map((r) => [r.id, r]));
}

function result(results: Map<string, GoResult>, id: string): GoResult {
  const r = results.get(id);
  assert.ok(r, `Go answered nothing for ${id}`);
  return r;
}

const b64 = (h: Uint8Array): string => Buffer.from(h).toString('base64');

function flipBit(h: Hash, bit: number): Hash {
  const out = Buffer.from(h);
  const at = Math.floor(bit / 8) % out.length;
  out[at] = (out[at] as number) ^ (1 << (bit % 8));
  return out;
}

// Random cases and entry hashes from one seed, printed on failure (ALP_TLOG_SEED=… reruns them).
const SEED = Number(process.env.ALP_TLOG_SEED ?? Date.now() % 2 ** 31);
const seeded = (what: string): string => `${what} (ALP_TLOG_SEED=${SEED})`;

// The log's leaves: 300 audit entry hashes. Go's record data is the entry hash's 32 bytes.
const SIZE = 300;
const ENTRY_HASHES: Digest[] = Array.from(
  { length: SIZE },
  (_, i) => `sha256:${createHash('sha256').update(`${SEED}:${i}`).digest('hex')}` as Digest,
);
const RECORDS_HEX = ENTRY_HASHES.map((d) => d.slice('sha256:'.length));
const LEAVES = ENTRY_HASHES.map(auditLeafHash);

async function tiledTree(height: number, batches: number[]): Promise<{ tree: TiledTree; store: MemoryTiles; sizes: number[] }> {
  const store = new MemoryTiles();
  const sizes: number[] = [];
  let size = 0;
  for (const b of [...batches, SIZE]) {
    const out = await appendLeaves(size, LEAVES.slice(size, Math.min(SIZE, size + b)), store, height);
    store.write(out.tiles);
    size = out.size;
    sizes.push(size);
    if (size === SIZE) break;
  }
  return { tree: new TiledTree(SIZE, store, height), store, sizes };
}

/** Go's signer key string for the same Ed25519 key: PRIVATE+KEY+<name>+<hash>+<base64(0x01 || seed)>. */
function goSignerKey(name: string, pem: string, publicKey: Uint8Array): string {
  const seed = Buffer.from(createPrivateKey(pem).export({ format: 'jwk' }).d as string, 'base64url');
  return `PRIVATE+KEY+${name}+${keyHash(name, publicKey).toString(16).padStart(8, '0')}+${Buffer.concat([Buffer.of(1), seed]).toString('base64')}`;
}

describe('Go sumdb/note verifies ALP signed checkpoints', () => {
  it("opens the checkpoint under ALP's verifier key, reads origin, size and root, and signs it identically", async () => {
    const origin = `alp.test/log/${randomBytes(8).toString('hex')}`;
    const keyFile = path.join(tempDir('alp-go-key'), 'keys', 'log.ed25519.pem');
    const signer = await openFileSigner(keyFile, origin);
    const { tree } = await tiledTree(8, [17, 100]);
    const root = await tree.root();
    const note = await signCheckpoint({ origin, size: SIZE, root }, signer);
    const vkey = verifierKey(signer.name, signer.publicKey);
    const skey = goSignerKey(origin, fs.readFileSync(keyFile, 'utf8'), signer.publicKey);

    const r = result(runGo({ notes: [{ id: 'checkpoint', note, vkey, skey }] }), 'checkpoint');
    assert.equal(r.error, undefined);
    assert.equal(r.ok, true);
    assert.equal(r.text, formatCheckpointBody({ origin, size: SIZE, root }));
    assert.equal(r.origin, origin);
    assert.equal(r.size, SIZE);
    assert.equal(r.root, b64(root));
    assert.equal(r.go_signed, note, 'Go signing the same text with the same key gives the same note');
  });

  it('refuses a flipped bit in the signature, an altered size or root, and another key', async () => {
    const origin = 'alp.test/log/negative';
    const signer = keySigner(origin, createPrivateKey(fs.readFileSync(await keyFileFor(origin), 'utf8')));
    const other = keySigner(origin, createPrivateKey(fs.readFileSync(await keyFileFor(`${origin}-other`), 'utf8')));
    const root = await (await tiledTree(8, [])).tree.root(SIZE);
    const note = await signCheckpoint({ origin, size: SIZE, root }, signer);
    const vkey = verifierKey(signer.name, signer.publicKey);
    const sigB64 = (note.split('\n')[4] as string).split(' ')[2] as string;
    const sig = Buffer.from(sigB64, 'base64');
    const cases = fc.sample(fc.integer({ min: 32, max: 68 * 8 - 1 }), { numRuns: 8, seed: SEED }).map((bit, i) => {
      const flipped = Buffer.from(sig);
      flipped[Math.floor(bit / 8)] = (flipped[Math.floor(bit / 8)] as number) ^ (1 << (bit % 8));
      return { id: `sig-bit-${i}-${bit}`, note: note.replace(sigB64, flipped.toString('base64')), vkey };
    });
    cases.push(
      { id: 'size', note: note.replace(`\n${SIZE}\n`, `\n${SIZE - 1}\n`), vkey },
      { id: 'root', note: note.replace(b64(root), b64(flipBit(root, 7))), vkey },
      { id: 'other-key', note: await signCheckpoint({ origin, size: SIZE, root }, other), vkey },
      { id: 'honest', note, vkey },
    );
    const results = runGo({ notes: cases });
    assert.equal(result(results, 'honest').ok, true);
    for (const c of cases.filter((c) => c.id !== 'honest')) {
      const r = result(results, c.id);
      assert.equal(r.ok, false, seeded(`Go accepted ${c.id}`));
      assert.match(r.error ?? '', c.id === 'other-key' ? /no verifiable signatures/ : /invalid signature|malformed/, c.id);
    }
  });
});

async function keyFileFor(name: string): Promise<string> {
  const file = path.join(tempDir('alp-go-key'), `${createHash('sha256').update(name).digest('hex').slice(0, 8)}.pem`);
  await openFileSigner(file, name);
  return file;
}

describe('Go sumdb/tlog verifies ALP roots and proofs', () => {
  const cases = fc.sample(
    fc
      .integer({ min: 1, max: SIZE })
      .chain((n) => fc.record({ n: fc.constant(n), i: fc.nat(n - 1), m: fc.integer({ min: 1, max: n }), bit: fc.nat(255) })),
    { numRuns: 150, seed: SEED },
  );

  it('recomputes every root of 1..300 records, and checks ALP inclusion and consistency proofs for random sizes', async () => {
    const { tree } = await tiledTree(8, [1, 2, 61, 190]);
    const roots = await Promise.all(Array.from({ length: SIZE }, (_, k) => tree.root(k + 1)));
    const inclusion = await Promise.all(
      cases.map(async (c, k) => ({
        id: `inc-${k}`,
        size: c.n,
        index: c.i,
        root: b64(roots[c.n - 1] as Hash),
        proof: (await tree.inclusionProof(c.i, c.n)).map(b64),
      })),
    );
    const consistency = await Promise.all(
      cases.map(async (c, k) => ({
        id: `con-${k}`,
        old: c.m,
        new: c.n,
        old_root: b64(roots[c.m - 1] as Hash),
        new_root: b64(roots[c.n - 1] as Hash),
        proof: (await tree.consistencyProof(c.m, c.n)).map(b64),
      })),
    );
    const results = runGo({ roots: roots.map((r, k) => ({ id: `root-${k + 1}`, size: k + 1, root: b64(r) })), inclusion, consistency });
    for (let k = 1; k <= SIZE; k++) assert.equal(result(results, `root-${k}`).ok, true, seeded(`Go's root of ${k} records differs`));
    for (const c of [...inclusion, ...consistency]) {
      const r = result(results, c.id);
      assert.equal(r.error, undefined, seeded(`${c.id}: ${JSON.stringify(c).slice(0, 200)}`));
      assert.equal(r.ok, true, seeded(c.id));
      assert.equal(r.same_as_go, true, seeded(`${c.id}: Go's own proof differs from ALP's`));
    }
  });

  it('refuses a flipped bit in a proof hash or a root, a wrong index and another record', async () => {
    const { tree } = await tiledTree(8, [5, 250]);
    const inclusion: Record<string, unknown>[] = [];
    const consistency: Record<string, unknown>[] = [];
    for (const [k, c] of cases.slice(0, 60).entries()) {
      const root = await tree.root(c.n);
      const proof = await tree.inclusionProof(c.i, c.n);
      const at = c.bit % Math.max(1, proof.length);
      if (proof.length > 0)
        inclusion.push({
          id: `inc-proof-${k}`,
          size: c.n,
          index: c.i,
          root: b64(root),
          proof: proof.map((h, j) => b64(j === at ? flipBit(h, c.bit) : h)),
        });
      inclusion.push({ id: `inc-root-${k}`, size: c.n, index: c.i, root: b64(flipBit(root, c.bit)), proof: proof.map(b64) });
      inclusion.push({
        id: `inc-record-${k}`,
        size: c.n,
        index: c.i,
        record: randomBytes(32).toString('hex'),
        root: b64(root),
        proof: proof.map(b64),
      });
      if (c.n > 1) inclusion.push({ id: `inc-index-${k}`, size: c.n, index: (c.i + 1) % c.n, root: b64(root), proof: proof.map(b64) });

      const oldRoot = await tree.root(c.m);
      const cproof = await tree.consistencyProof(c.m, c.n);
      const cat = c.bit % Math.max(1, cproof.length);
      const base = { old: c.m, new: c.n, old_root: b64(oldRoot), new_root: b64(root) };
      if (cproof.length > 0)
        consistency.push({ id: `con-proof-${k}`, ...base, proof: cproof.map((h, j) => b64(j === cat ? flipBit(h, c.bit) : h)) });
      consistency.push({ id: `con-old-${k}`, ...base, old_root: b64(flipBit(oldRoot, c.bit)), proof: cproof.map(b64) });
      consistency.push({ id: `con-new-${k}`, ...base, new_root: b64(flipBit(root, c.bit)), proof: cproof.map(b64) });
    }
    const results = runGo({ inclusion, consistency });
    assert.ok(inclusion.length + consistency.length > 300);
    for (const c of [...inclusion, ...consistency]) {
      const r = result(results, c.id as string);
      assert.equal(r.ok, false, seeded(`Go accepted the tampered case ${String(c.id)}`));
      assert.match(r.error ?? '', /invalid transparency proof|invalid inputs/, String(c.id));
    }
  });

  it("ALP's tiles are tlog's tiles, paths included (tile heights 2, 3 and 8)", async () => {
    const tiles: Record<string, unknown>[] = [];
    const paths = new Map<string, string>();
    for (const height of [2, 3, 8]) {
      const { store, sizes } = await tiledTree(height, [3, 40, 77]);
      for (const size of sizes)
        for (const t of tilesOf(size, height)) {
          const stored = store.tiles.get(`${t.level}/${t.index}`);
          assert.ok(stored);
          const id = `tile-${height}-${size}-${t.level}-${t.index}-${t.width}`;
          tiles.push({
            id,
            size,
            height,
            level: t.level,
            index: t.index,
            width: t.width,
            data: b64(stored.data.subarray(0, t.width * 32)),
          });
          paths.set(id, tilePath(t, height));
        }
    }
    const results = runGo({ tiles });
    for (const t of tiles) {
      const r = result(results, t.id as string);
      assert.equal(r.error, undefined, String(t.id));
      assert.equal(r.ok, true, `tile ${String(t.id)} differs from Go's`);
      // Go's path carries the height (tile/H/L/N), C2SP's does not (tile/L/N).
      assert.equal(r.go_path?.replace(/^tile\/\d+\//, 'tile/'), paths.get(t.id as string));
    }
  });
});

describe('Go verifies a checkpoint of the wired log (issue 20 item 1)', () => {
  it("opens the sequencer's signed checkpoint, recomputes its root from the bundles' records, checks proofs and tiles read from the content store", async () => {
    const ctx = await embeddedContext();
    try {
      await initInstallation(ctx);
      await attachAuditSinks(ctx);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const { head } = await createArtifact(ctx, agent, { name: `go${i}`, filename: 'a.sh', body: bytesOf(`echo ${i}`) });
        ids.push(head.artifact_id);
      }
      for (let round = 0; round < 3; round++) {
        for (const id of ids) await propose(ctx, agent, id).catch(() => undefined);
        for (const id of ids.slice(0, 2 + round)) await addVersion(ctx, agent, id, { filename: 'a.sh', body: bytesOf(`v${round}`) });
        const lease = await acquireLease(ctx, 'go');
        assert.ok(lease);
        await runRound(ctx, lease, { maxLeaves: 7 + round * 50 }); // several batches, tiles extended across rounds
      }
      const lease = await acquireLease(ctx, 'go');
      assert.ok(lease);
      let r = await runRound(ctx, lease);
      while (r.appended > 0) r = await runRound(ctx, lease);
      const signer = await installationSigner(ctx);
      assert.ok(r.checkpoint);
      const state = await readLogState(ctx);
      const entries = await readLeafEntries(ctx.content, 0, state.size);
      const records = entries.map((e) => e.hash.slice('sha256:'.length));
      const tree = new TiledTree(state.size, contentTileReader(ctx.content));
      const tiles = await Promise.all(
        tilesOf(state.size).map(async (t) => {
          const [data] = await contentTileReader(ctx.content).readTiles([t]);
          return {
            id: `tile-${t.level}-${t.index}-${t.width}`,
            size: state.size,
            height: 8,
            level: t.level,
            index: t.index,
            width: t.width,
            data: b64((data as Uint8Array).subarray(0, t.width * 32)),
          };
        }),
      );
      const inclusion = await Promise.all(
        [0, Math.floor(state.size / 2), state.size - 1].map(async (i) => ({
          id: `inc-${i}`,
          size: state.size,
          index: i,
          root: b64(state.root),
          proof: (await tree.inclusionProof(i)).map(b64),
        })),
      );
      const results = runGo({
        records,
        notes: [{ id: 'checkpoint', note: r.checkpoint, vkey: verifierKey(signer.name, signer.publicKey) }],
        roots: [{ id: 'root', size: state.size, root: b64(state.root) }],
        inclusion,
        tiles,
      });
      const note = result(results, 'checkpoint');
      assert.equal(note.ok, true, note.error);
      assert.equal(note.size, state.size);
      assert.equal(note.root, b64(state.root));
      assert.equal(result(results, 'root').ok, true, "Go's root of the bundles' records is the checkpoint's");
      for (const c of inclusion) assert.equal(result(results, c.id).ok, true, c.id);
      for (const t of tiles) assert.equal(result(results, t.id).ok, true, t.id);
    } finally {
      await ctx.items.close();
    }
  });
});
