/**
 * What the crash campaign checks after every kill, on the installation the killed worker left:
 *
 *   start      the next start does what `alp start` / `alp init` do on open (initAndDescribe: the
 *              installation record, the telemetry outbox, content cleanupInterrupted)
 *   temp       afterwards no `.alp-tmp-*` file is left in the content root (fs engine)
 *   fence      a fence left by a killed maintenance is recovered as an operator would:
 *              `alp epoch advance` + `alp maintenance release` (advanceEpoch + recoverMaintenance)
 *   reconcile  `alp reconcile` is VERIFIED: every referenced object exists and re-hashes to its
 *              digest, every audit chain verifies (unexpected orphans are allowed, and counted)
 *   telemetry  the outbox counters equal the items, and every audit item was admitted or counted dropped
 *   journal    every acknowledged operation is visible: its artifact, version, state move, approval,
 *              run, output, provenance step, archive copy, delivered record, backup, quarantine or
 *              purge is there, with the keys and digests it reported
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { initAndDescribe } from '../../src/cli/commands/admin.ts';
import type { Runtime } from '../../src/cli/runtime.ts';
import type { Clock } from '../../src/core/clock.ts';
import type { StorageConfig } from '../../src/core/config.ts';
import { artifactPk, executionSk, HEAD_SK, provenanceSk, RUN_POINTER_SK, runPk, SYS_PK, versionSk } from '../../src/core/keys.ts';
import { getOriginalOrArchived } from '../../src/lifecycle/archived-read.ts';
import { archivedOriginals } from '../../src/lifecycle/references.ts';
import { listBackups } from '../../src/recovery/backup.ts';
import { openBackup } from '../../src/recovery/backup-format.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { contentRootId, observationKey } from '../../src/retention/model.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { type Item, queryAll } from '../../src/store/item-store.ts';
import { readFence } from '../../src/system/fence.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch, readEpoch } from '../../src/system/state.ts';
import { assertCountersMatchItems, auditItems } from '../helpers/telemetry-harness.ts';
import type { JournalLine } from './journal.ts';

export interface CheckResult {
  checks: number;
  removedTemp: number;
  fenceRecovered: boolean;
  reconcile: { items: number; objects: number; bytes: number; unexpected: number; entries: number; artifacts: number };
  telemetry: { accepted: number; dropped: number; delivered: number; live: number };
  journalChecked: number;
}

export class CheckFailure extends Error {
  constructor(
    readonly check: string,
    message: string,
  ) {
    super(`${check}: ${message}`);
  }
}

async function step<T>(name: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof CheckFailure) throw e;
    throw new CheckFailure(name, e instanceof Error ? e.message : String(e));
  }
}

/** Every `.alp-tmp-*` file under a content root. */
export function tempFiles(root: string): string[] {
  const out: string[] = [];
  const visit = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) visit(p);
      else if (e.name.startsWith('.alp-tmp-')) out.push(p);
    }
  };
  if (fs.existsSync(root)) visit(root);
  return out;
}

export async function checkInstallation(
  ctx: ServiceContext,
  config: StorageConfig,
  journal: JournalLine[],
  clock: Clock,
): Promise<CheckResult> {
  let checks = 0;
  // 1. The next start.
  const status = await step('start', () => initAndDescribe({ ctx, config, opts: {}, close: async () => {} } as Runtime));
  checks++;
  // 2. No temp file left behind.
  if (config.content.engine === 'fs') {
    const left = tempFiles(config.content.root);
    if (left.length)
      throw new CheckFailure('temp', `${left.length} temp file(s) remain after the next start: ${left.slice(0, 3).join(', ')}`);
    checks++;
  }
  // 3. A fence a killed maintenance left: the operator's recovery.
  let fenceRecovered = false;
  if (await readFence(ctx)) {
    await step('fence', async () => {
      await advanceEpoch(ctx.items, 'torture-operator', 'worker killed during maintenance', clock.now().toISOString());
      const r = await recoverMaintenance(ctx, await readEpoch(ctx.items), 'torture-operator');
      if (!r.recovered) throw new Error('recovery did not take the fence over');
      if (await readFence(ctx)) throw new Error('the fence is still held after recovery');
    });
    fenceRecovered = true;
  }
  checks++;
  // 4. Reconcile: VERIFIED for everything referenced, every chain intact.
  const report = await step('reconcile', () => reconcile(ctx, { actor: 'torture-operator' }));
  if (report.status !== 'VERIFIED') {
    const failing = report.findings.filter((f) => f.kind !== 'derived' && f.kind !== 'unexpected');
    throw new CheckFailure('reconcile', `FAILED: ${JSON.stringify(failing.slice(0, 4))}`);
  }
  if (report.audit.broken !== 0) throw new CheckFailure('audit', `${report.audit.broken} broken chain(s)`);
  checks += 2;
  // 5. Telemetry counters equal the items; every audit event was admitted or counted dropped.
  const telemetry = await step('telemetry', async () => {
    const { state } = await assertCountersMatchItems(ctx.items);
    const audit = await auditItems(ctx.items);
    assert.equal(audit.size, (state.accepted as number) + (state.dropped as number), 'audit items = accepted + dropped');
    return {
      accepted: state.accepted as number,
      dropped: state.dropped as number,
      delivered: state.delivered as number,
      live: state.live_records as number,
    };
  });
  checks++;
  // 6. Every acknowledged operation is visible.
  await step('journal', () => checkJournal(ctx, journal));
  checks++;
  return {
    checks,
    removedTemp: status.interrupted_uploads_removed,
    fenceRecovered,
    reconcile: {
      items: report.items,
      objects: report.objects.verified,
      bytes: report.objects.bytes,
      unexpected: report.unexpected.count,
      entries: report.audit.entries,
      artifacts: report.audit.artifacts,
    },
    telemetry,
    journalChecked: journal.length,
  };
}

function count<K>(m: Map<K, number>, k: K, by = 1) {
  m.set(k, (m.get(k) ?? 0) + by);
}

export async function checkJournal(ctx: ServiceContext, journal: JournalLine[]): Promise<void> {
  const partitions = new Map<string, Item[]>();
  const partition = async (id: string) => {
    let p = partitions.get(id);
    if (!p) {
      p = await queryAll(ctx.items, { pk: artifactPk(id), consistent: true });
      partitions.set(id, p);
    }
    return p;
  };
  const item = async (id: string, sk: string) => (await partition(id)).find((i) => i.SK === sk);
  const fail = (line: JournalLine, why: string): never => {
    throw new Error(
      `acknowledged ${line.op} (run ${line.run} #${line.seq}) is not visible: ${why} — ${JSON.stringify(line).slice(0, 300)}`,
    );
  };
  const wantTransitions = new Map<string, number>();
  const wantApprovals = new Map<string, number>();
  const acked = new Set<string>();
  const root = contentRootId(ctx.content.location);
  for (const line of journal) {
    switch (line.op) {
      case 'create':
      case 'version': {
        const v = await item(line.artifact_id, versionSk(line.version));
        if (!v) fail(line, 'no version item');
        for (const f of ['content_key', 'content_hash', 'size', 'metadata_key', 'metadata_hash'] as const)
          if (v?.[f] !== line[f]) fail(line, `${f} is ${String(v?.[f])}`);
        if (!(await item(line.artifact_id, HEAD_SK))) fail(line, 'no HEAD');
        break;
      }
      case 'transition':
        count(wantTransitions, `${line.artifact_id} ${line.version} ${line.to}`);
        break;
      case 'approval':
        count(wantApprovals, `${line.artifact_id} ${line.version} ${line.decision} ${line.actor}`);
        break;
      case 'execution': {
        const ptr = await ctx.items.get({ PK: runPk(line.run_id), SK: RUN_POINTER_SK }, { consistent: true });
        if (ptr?.artifact_id !== line.artifact_id) fail(line, 'no run pointer');
        const x = await item(line.artifact_id, executionSk(line.run_id));
        if (x?.version !== line.version) fail(line, 'no execution item');
        break;
      }
      case 'output': {
        const ptr = await ctx.items.get({ PK: runPk(line.run_id), SK: RUN_POINTER_SK }, { consistent: true });
        const x = ptr ? await item(ptr.artifact_id as string, executionSk(line.run_id)) : undefined;
        const out = (x?.outputs as Record<string, { key: string; digest: string; size: number }> | undefined)?.[line.name];
        if (!out || out.key !== line.key || out.digest !== line.digest || out.size !== line.size)
          fail(line, `output is ${JSON.stringify(out)}`);
        break;
      }
      case 'finish': {
        const ptr = await ctx.items.get({ PK: runPk(line.run_id), SK: RUN_POINTER_SK }, { consistent: true });
        const x = ptr ? await item(ptr.artifact_id as string, executionSk(line.run_id)) : undefined;
        if (x?.status !== line.status || x.exit_code !== line.exit_code) fail(line, `run is ${String(x?.status)} ${String(x?.exit_code)}`);
        break;
      }
      case 'compensation': {
        const c = await item(line.artifact_id, `COMP#${line.comp_id}`);
        if (!c || c.content_key !== line.content_key || c.content_hash !== line.content_hash) fail(line, 'no compensation record');
        break;
      }
      case 'provenance': {
        const p = await item(line.artifact_id, provenanceSk(line.step));
        if (p?.hash !== line.hash) fail(line, `step ${line.step} is ${String(p?.hash)}`);
        break;
      }
      case 'archive': {
        const head = await item(line.artifact_id, HEAD_SK);
        const objects = (head?.archived as { objects: Array<{ archive_key: string; digest: string }> } | undefined)?.objects ?? [];
        for (const a of line.objects)
          if (!objects.some((x) => x.archive_key === a.archive_key && x.digest === a.digest))
            fail(line, `${a.archive_key} is not recorded`);
        break;
      }
      case 'ack':
        for (const id of line.ids) acked.add(id);
        break;
      case 'backup': {
        const rec = (await listBackups(ctx)).find((b) => b.backup_id === line.backup_id);
        if (rec?.status !== 'COMPLETE' || rec.manifest_digest !== line.manifest_digest) fail(line, `registry says ${String(rec?.status)}`);
        // The directory is a complete backup: its manifest and files verify.
        await openBackup(line.location, { expectedManifestDigest: line.manifest_digest }).catch((e: unknown) =>
          fail(line, `backup does not verify: ${String(e)}`),
        );
        break;
      }
      case 'retention': {
        for (const key of line.purged) {
          const obs = await ctx.items.get(observationKey(root, key, ctx.layout.index_shards), { consistent: true });
          if (obs?.state !== 'PURGED') fail(line, `${key} observation is ${String(obs?.state)}`);
          if (await ctx.content.head(key)) fail(line, `${key} was reported purged but is present`);
        }
        for (const key of line.quarantined) {
          const obs = await ctx.items.get(observationKey(root, key, ctx.layout.index_shards), { consistent: true });
          const present = (await ctx.content.head(key)) !== undefined;
          // Quarantined, then possibly purged; or reset because it became referenced again (bytes kept).
          const ok =
            obs?.state === 'QUARANTINED' ||
            obs?.state === 'PREPARED' ||
            obs?.state === 'PURGED' ||
            (present && (!obs || obs.state === 'GRACE'));
          if (!ok) fail(line, `${key} is ${String(obs?.state)}, present ${present}`);
        }
        break;
      }
    }
  }
  // State moves and approvals: at least as many in the chains as were acknowledged.
  const haveTransitions = new Map<string, number>();
  const haveApprovals = new Map<string, number>();
  const ids = new Set([...wantTransitions.keys(), ...wantApprovals.keys()].map((k) => k.split(' ')[0] as string));
  for (const id of ids) {
    for (const i of await partition(id)) {
      if (i.type === 'transition') count(haveTransitions, `${id} ${String(i.version)} ${String(i.to)}`);
      if (i.type === 'approval') count(haveApprovals, `${id} ${String(i.version)} ${String(i.decision)} ${(i.actor as { id: string }).id}`);
    }
  }
  for (const [k, n] of wantTransitions)
    if ((haveTransitions.get(k) ?? 0) < n)
      throw new Error(`acknowledged transition ${k} ×${n}, the chain has ${haveTransitions.get(k) ?? 0}`);
  for (const [k, n] of wantApprovals)
    if ((haveApprovals.get(k) ?? 0) < n) throw new Error(`acknowledged approval ${k} ×${n}, the chain has ${haveApprovals.get(k) ?? 0}`);
  // Delivered telemetry records have left the queue.
  if (acked.size) {
    const live = await queryAll(ctx.items, { pk: 'TELQ#outbox', consistent: true });
    for (const r of live)
      if (r.type === 'telemetry_record' && acked.has(r.id as string))
        throw new Error(`acknowledged record ${String(r.id)} is still queued`);
  }
  void SYS_PK;
}

/** Verified reads of every object the journal acknowledged (the end of an installation's segment). */
export async function readBackAcknowledged(ctx: ServiceContext, journal: JournalLine[]): Promise<{ objects: number; bytes: number }> {
  const refs: Array<{ key: string; digest: string; size?: number }> = [];
  for (const l of journal) {
    if (l.op === 'create' || l.op === 'version')
      refs.push({ key: l.content_key, digest: l.content_hash, size: l.size }, { key: l.metadata_key, digest: l.metadata_hash });
    if (l.op === 'output') refs.push({ key: l.key, digest: l.digest, size: l.size });
    if (l.op === 'archive') for (const a of l.objects) refs.push({ key: a.archive_key, digest: a.digest, size: a.size });
  }
  // An archived original may be reclaimed by retention once its verified copy exists (issue 17 B13):
  // then the version reads the copy (lifecycle/archived-read.ts), and so does this check. The copies
  // come from the journal and from the items: an archive killed after its commit, before its journal
  // line (or finished by the next start's recovery), is journaled by nobody.
  const copies = new Map<string, string>();
  for (const l of journal) if (l.op === 'archive') for (const a of l.objects) copies.set(a.digest, a.archive_key);
  for (let cursor: string | undefined, first = true; first || cursor; first = false) {
    const page = await ctx.items.scan(cursor ? { cursor } : {});
    for (const item of page.items) for (const a of archivedOriginals(item)) copies.set(a.digest, a.copy);
    cursor = page.cursor;
  }
  let bytes = 0;
  for (const ref of refs) {
    const opts = ref.size === undefined ? {} : { expectedSize: ref.size };
    const copy = copies.get(ref.digest);
    const stream = await getOriginalOrArchived(
      ctx.content,
      { original: ref.key, archive: copy === ref.key ? undefined : copy },
      ref.digest as never,
      opts,
    );
    for await (const c of stream) bytes += (c as Buffer).length;
  }
  return { objects: refs.length, bytes };
}
