/**
 * Issue 20 item 1: an attacker with write access to the storage (table and bucket, or the SQLite file
 * and content directory) but not the signing key is caught by `alp audit verify --checkpoint NOTE
 * --key VKEY`, one attack per test, on both profiles — each attack leaves the chains verifying on
 * their own (and the append counter agreeing where the attack lowers it too):
 * (a) a chain's tail deleted with its HEAD, its markers and the append counter set back;
 * (b) an entry in the middle rewritten, the rest of the chain, its HEAD and its markers recomputed;
 * (c) a tile, an entry bundle, or STATE's root rewritten;
 * (e) an installation log's tail (the approval policy's) deleted with its head and log record set back;
 * (d) the log itself truncated (STATE set back to a smaller, consistent tree).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { auditHash, commitAudited, readHead } from '../../src/audit/chain.ts';
import { checkAuditCounter, establishAuditBaseline } from '../../src/audit/counter.ts';
import { loadChain } from '../../src/audit/history.ts';
import { chainRef } from '../../src/audit/tlog/chains.ts';
import { checkpointNow } from '../../src/audit/tlog/checkpoint-now.ts';
import { STATE_KEY } from '../../src/audit/tlog/lease.ts';
import { headQueue, isMarker, isMarkerRow, type Marker } from '../../src/audit/tlog/markers.ts';
import { verifierKey, verifierOf } from '../../src/audit/tlog/note.ts';
import { bundleKey, contentTileReader, readObject, tileKey } from '../../src/audit/tlog/objects.ts';
import { readLogState } from '../../src/audit/tlog/state.ts';
import { TiledTree } from '../../src/audit/tlog/tiles.ts';
import { verifyLogCheckpoint } from '../../src/audit/tlog/verify.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { verifyAllAudit } from '../../src/audit/verify-all.ts';
import { APPROVAL_POLICY_LOG_HEAD_SK, APPROVAL_POLICY_PK, artifactPk, HEAD_SK } from '../../src/core/keys.ts';
import { setApprovalPolicy } from '../../src/lifecycle/approval-policy.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { type Item, queryAll } from '../../src/store/item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { fileKeySource, installationSigner } from '../../src/system/installation-key.ts';
import { stateKey } from '../../src/telemetry/shards.ts';
import { bulkAuditPlan } from '../helpers/audit-plan.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { cli, embeddedProfile } from './checks.ts';

after(stopDistributedServers);

interface Setup {
  ctx: ServiceContext;
  a: string;
  b: string;
  note: string;
  vkey: string;
  close(): Promise<void>;
}

async function append(ctx: ServiceContext, id: string, n: number, tag: string): Promise<void> {
  await commitAudited(ctx, { [id]: await readHead(ctx, id) }, bulkAuditPlan(id, n, tag));
}

async function prepare(ctx: ServiceContext, close: () => Promise<void>): Promise<Setup> {
  await (await attachAuditSinks(ctx)).open();
  await initInstallation(ctx);
  await establishAuditBaseline(ctx);
  const a = (await createArtifact(ctx, agent, { name: 'a', filename: 'a.sh', body: bytesOf('echo a') })).head.artifact_id;
  const b = (await createArtifact(ctx, agent, { name: 'b', filename: 'b.sh', body: bytesOf('echo b') })).head.artifact_id;
  await append(ctx, b, 3, 'middle');
  await append(ctx, a, 1, 'kept');
  await append(ctx, a, 2, 'tail');
  // An installation log with two entries (the approval policy's), a chain of the transparency log too.
  await setApprovalPolicy(ctx, alice, { min_quorum: 2 });
  await setApprovalPolicy(ctx, alice, { min_quorum: 3 });
  const { checkpoint: note } = await checkpointNow(ctx);
  const signer = await installationSigner(ctx);
  const vkey = verifierKey(signer.name, signer.publicKey);
  return { ctx, a, b, note, vkey, close };
}

const profiles: Array<[string, () => Promise<Setup>]> = [
  [
    'SQLite + directory',
    async () => {
      const ctx = await embeddedContext();
      return prepare(ctx, () => ctx.items.close());
    },
  ],
  [
    'DynamoDB Local + s3rver',
    async () => {
      const inst = await distributedInstallation();
      const ctx = Object.assign(inst.ctx, { signingKey: fileKeySource(path.join(tempDir('alp-tlog-key'), 'k.pem'), { create: true }) });
      return prepare(ctx, () => inst.close());
    },
  ],
];

async function verdict(s: Setup) {
  return verifyLogCheckpoint(s.ctx, s.note, verifierOf(await installationSigner(s.ctx)));
}

async function partition(ctx: ServiceContext, id: string): Promise<Item[]> {
  return queryAll(ctx.items, { pk: artifactPk(id), consistent: true });
}

/**
 * The attacker's edit of a chain's log record to agree with a rewritten chain: every locator, pending
 * marker and the HEAD's queue keep only the entries `hashOf` still has, with its hashes (a record left
 * empty is deleted).
 */
async function rewriteLogRecord(ctx: ServiceContext, id: string, hashOf: (seq: number) => string | undefined): Promise<void> {
  const ref = chainRef(id);
  const items = await queryAll(ctx.items, { pk: ref.pk, consistent: true });
  const keep = (first: number, hashes: readonly string[]) => {
    const out: string[] = [];
    for (let i = 0; i < hashes.length && hashOf(first + i) !== undefined; i++) out.push(hashOf(first + i) as string);
    return out;
  };
  for (const m of items.filter((i) => isMarkerRow(i) && isMarker(i)) as Marker[]) {
    const hashes = keep(m.first_seq, m.hashes);
    if (hashes.length === 0) await ctx.items.delete({ PK: m.PK, SK: m.SK });
    else await ctx.items.put({ ...m, hashes, last_seq: m.first_seq + hashes.length - 1 });
  }
  const head = items.find((i) => i.SK === ref.headSk) as Item;
  const q = headQueue(head);
  const hashes = keep(q.first, q.hashes);
  await ctx.items.update(
    { PK: ref.pk, SK: ref.headSk },
    { set: hashes.length > 0 ? { tlog_q_first: q.first, tlog_q: hashes } : { tlog_q_first: undefined, tlog_q: undefined } },
  );
}

/** Storage write without ALP: replace an object's bytes (delete, then put: the create-only rule is ALP's, not the attacker's). */
async function overwrite(ctx: ServiceContext, key: string, bytes: Buffer): Promise<void> {
  await ctx.content.delete(key);
  await ctx.content.put(key, [bytes]);
}

for (const [profile, open] of profiles) {
  describe(`issue 20 item 1: the transparency log catches a storage-only attacker (${profile})`, () => {
    it('an intact installation extends its checkpoint; a checkpoint signed by another key is refused', async () => {
      const s = await open();
      try {
        const v = await verdict(s);
        assert.deepEqual(v.findings, []);
        const all = await verifyAllAudit(s.ctx, { logCheckpoint: { note: s.note, verifier: verifierOf(await installationSigner(s.ctx)) } });
        assert.deepEqual([all.ok, all.log_state?.ok, all.log?.ok], [true, true, true], JSON.stringify(all.broken));
        assert.equal(v.checkpoint_size, 11, '8 artifact entries, the key activation, 2 policy changes');
        const forged = s.note.replace(
          /\n\n— (\S+) .*\n$/,
          '\n\n— $1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n',
        );
        await assert.rejects(verifyLogCheckpoint(s.ctx, forged, verifierOf(await installationSigner(s.ctx))), /INTEGRITY|signature/i);
      } finally {
        await s.close();
      }
    });

    it('(a) tail truncation: entries, their log record (locator, HEAD queue), HEAD and the append counter set back', async () => {
      const s = await open();
      try {
        const { ctx, a } = s;
        const items = await partition(ctx, a);
        const tail = items.filter((i) => typeof i.seq === 'number' && (i.seq as number) >= 3 && i.type === 'transition');
        assert.equal(tail.length, 2);
        const kept = items.find((i) => i.seq === 2 && i.type === 'transition') as Item;
        for (const i of tail) await ctx.items.delete({ PK: i.PK, SK: i.SK });
        const before = new Map(
          items.filter((i) => typeof i.seq === 'number' && (i.seq as number) < 3).map((i) => [i.seq as number, i.hash as string]),
        );
        await rewriteLogRecord(ctx, a, (seq) => before.get(seq));
        await ctx.items.update({ PK: artifactPk(a), SK: HEAD_SK }, { set: { audit_seq: 2, audit_head_hash: kept.hash } });
        await ctx.items.update(stateKey, { add: { audit_appended: -2 } });
        assert.deepEqual((await verifyArtifactAudit(ctx, a)).findings, [], 'the truncated chain verifies on its own');
        assert.equal((await checkAuditCounter(ctx)).ok, true, 'and the lowered counter agrees');
        const v = await verdict(s);
        assert.equal(v.ok, false);
        assert.equal(v.findings.filter((f) => /which its chain no longer has/.test(f.problem)).length, 2, JSON.stringify(v.findings));
      } finally {
        await s.close();
      }
    });

    it('(b) an entry in the middle rewritten, the chain after it, HEAD and its log record recomputed', async () => {
      const s = await open();
      try {
        const { ctx, b } = s;
        const { entries } = await loadChain(ctx, b);
        let prev: string | null = null;
        const rewritten = new Map<number, string>();
        for (const e of entries) {
          const seq = e.seq as number;
          const next: Item = { ...e, prev_hash: prev, ...(seq === 3 ? { note: 'history as the attacker tells it' } : {}) };
          delete next.hash;
          next.hash = auditHash(next);
          if (next.hash !== e.hash) await ctx.items.put(next);
          rewritten.set(seq, next.hash as string);
          prev = next.hash as string;
        }
        await ctx.items.update({ PK: artifactPk(b), SK: HEAD_SK }, { set: { audit_head_hash: prev } });
        await rewriteLogRecord(ctx, b, (seq) => rewritten.get(seq));
        assert.deepEqual((await verifyArtifactAudit(ctx, b)).findings, [], 'the rewritten chain verifies on its own');
        const v = await verdict(s);
        assert.equal(v.ok, false);
        assert.ok(
          v.findings.some((f) => /seq 3\)/.test(f.row) && /history was rewritten/.test(f.problem)),
          JSON.stringify(v.findings),
        );
      } finally {
        await s.close();
      }
    });

    it('(c) a rewritten tile, entry bundle or STATE root (each undone before the next)', async () => {
      const s = await open();
      try {
        const { ctx } = s;
        const state = await readLogState(ctx);
        const tile = tileKey({ level: 0, index: 0, width: state.size });
        const bundle = bundleKey(0, state.size);
        const stateItem = (await ctx.items.get(STATE_KEY, { consistent: true })) as Item;
        const attacks: Array<[string, RegExp, () => Promise<void>]> = [
          [
            'tile',
            /tile was rewritten|tiles/,
            async () => {
              const bytes = Buffer.from((await readObject(ctx.content, tile)) as Buffer);
              bytes[40] = (bytes[40] as number) ^ 1;
              await overwrite(ctx, tile, bytes);
            },
          ],
          [
            'bundle',
            /bundle was rewritten/,
            async () => {
              const lines = ((await readObject(ctx.content, bundle)) as Buffer).toString('utf8').split('\n');
              const forged = JSON.parse(lines[2] as string) as { h: string };
              forged.h = `sha256:${'0'.repeat(64)}`;
              lines[2] = JSON.stringify(forged);
              await overwrite(ctx, bundle, Buffer.from(lines.join('\n')));
            },
          ],
          [
            'state',
            /STATE's root/,
            async () => void (await ctx.items.update(STATE_KEY, { set: { root: Buffer.alloc(32, 7).toString('base64') } })),
          ],
        ];
        const originals = new Map([
          [tile, (await readObject(ctx.content, tile)) as Buffer],
          [bundle, (await readObject(ctx.content, bundle)) as Buffer],
        ]);
        for (const [target, expected, attack] of attacks) {
          await attack();
          const v = await verdict(s);
          assert.equal(v.ok, false, target);
          assert.ok(
            v.findings.some((f) => expected.test(f.problem)),
            `${target}: ${JSON.stringify(v.findings)}`,
          );
          // Without a checkpoint, alp audit verify still sees a tree that disagrees with STATE (not a consistent rewrite).
          if (target !== 'bundle') assert.equal((await verifyAllAudit(ctx)).log_state?.ok, false, target);
          for (const [key, bytes] of originals) await overwrite(ctx, key, bytes);
          await ctx.items.put(stateItem);
          assert.equal((await verdict(s)).ok, true, `${target} undone`);
        }
      } finally {
        await s.close();
      }
    });

    it("(e) an installation log truncated: the approval policy's last change, its head and its log record set back", async () => {
      const s = await open();
      try {
        const { ctx } = s;
        const entries = await queryAll(ctx.items, { pk: APPROVAL_POLICY_PK, sk: { beginsWith: 'LOG#' }, consistent: true });
        assert.equal(entries.length, 2);
        const [kept, gone] = entries as [Item, Item];
        await ctx.items.delete({ PK: gone.PK, SK: gone.SK });
        await ctx.items.update({ PK: APPROVAL_POLICY_PK, SK: APPROVAL_POLICY_LOG_HEAD_SK }, { set: { seq: 1, head_hash: kept.hash } });
        await rewriteLogRecord(ctx, APPROVAL_POLICY_PK, (seq) => (seq === 1 ? (kept.hash as string) : undefined));
        const all = await verifyAllAudit(ctx);
        assert.ok(
          !all.broken.some((b) => b.artifact_id.includes('polic')),
          `the truncated log verifies on its own: ${JSON.stringify(all.broken)}`,
        );
        const v = await verdict(s);
        assert.equal(v.ok, false);
        assert.ok(
          v.findings.some((f) => f.row.includes(`${APPROVAL_POLICY_PK} seq 2`) && /no longer has/.test(f.problem)),
          JSON.stringify(v.findings),
        );
      } finally {
        await s.close();
      }
    });

    it('(d) the log truncated: STATE set back to a smaller, self-consistent tree', async () => {
      const s = await open();
      try {
        const { ctx } = s;
        const root = await new TiledTree(6, contentTileReader(ctx.content)).root();
        await ctx.items.update(STATE_KEY, { set: { size: 6, root: Buffer.from(root).toString('base64') }, remove: ['checkpoint'] });
        const v = await verdict(s);
        assert.equal(v.ok, false);
        assert.match(v.findings[0]?.problem ?? '', /6 leaves, fewer than the checkpoint's 11 \(the log was truncated\)/);
      } finally {
        await s.close();
      }
    });
  });
}

describe('alp audit checkpoint / alp audit verify --checkpoint FILE --key VKEY (SQLite + directory)', () => {
  it('prints a signed checkpoint; verify accepts it under the pinned key, refuses another key, and fails (exit 5) after a tail truncation', async () => {
    const ctx = await embeddedContext();
    const p = embeddedProfile(ctx);
    const s = await prepare(ctx, () => ctx.items.close());
    try {
      const file = path.join(tempDir('alp-tlog-cp'), 'checkpoint.txt');
      const taken = await cli(p, ['audit', 'checkpoint', '--out', file]);
      assert.equal(taken.code, 0, taken.stderr);
      assert.equal(JSON.parse(taken.stdout).size, 11);
      const ok = await cli(p, ['audit', 'verify', '--checkpoint', file, '--key', s.vkey]);
      assert.equal(ok.code, 0, ok.stdout + ok.stderr);
      assert.equal(JSON.parse(ok.stdout).log.ok, true);
      const otherSigner = await (await import('../../src/system/signing-key.ts')).openFileSigner(
        path.join(tempDir('alp-k2'), 'k.pem'),
        s.vkey.split('+')[0] as string,
      );
      const wrongKey = await cli(p, [
        'audit',
        'verify',
        '--checkpoint',
        file,
        '--key',
        verifierKey(otherSigner.name, otherSigner.publicKey),
      ]);
      assert.equal(wrongKey.code, 5, wrongKey.stderr);
      // (a) again, through the CLI
      const tail = (await partition(ctx, s.a)).filter((i) => i.type === 'transition' && (i.seq as number) >= 3);
      for (const i of tail) await ctx.items.delete({ PK: i.PK, SK: i.SK });
      const kept = (await loadChain(ctx, s.a)).entries.at(-1) as Item;
      await ctx.items.update({ PK: artifactPk(s.a), SK: HEAD_SK }, { set: { audit_seq: 2, audit_head_hash: kept.hash } });
      const broken = await cli(p, ['audit', 'verify', '--checkpoint', file, '--key', s.vkey]);
      assert.equal(broken.code, 5, broken.stdout);
      assert.match(broken.stdout, /which its chain no longer has/);
    } finally {
      await s.close();
    }
  });
});
