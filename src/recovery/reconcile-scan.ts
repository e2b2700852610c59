/**
 * The phases of reconciliation (reconcile.ts) in bounded memory (issue 17 item A2): the references the
 * base table names go into an ObjectSet on disk (object-set.ts), the artifact ids into a scratch
 * table; objects are re-hashed and audit chains verified a page at a time in key order; the content
 * listing is streamed against the set; findings are counted in full but at most MAX_REPORTED_FINDINGS
 * of them are kept (FindingList), so a flood of missing objects or orphans cannot grow the heap.
 */
import { checkAuditCounter } from '../audit/counter.ts';
import { type ChainReport, verifyArtifactAudit } from '../audit/verify.ts';
import { observationPk, observationSk, restorePk } from '../core/keys.ts';
import { forEachLimited } from '../core/limit.ts';
import { IMMUTABLE_PREFIXES } from '../core/object-keys.ts';
import { provenanceArtifactId, publishProvenanceDocument } from '../lifecycle/provenance.ts';
import { type ObjectRef, refsOfItem } from '../lifecycle/references.ts';
import { StateRecount } from '../lifecycle/state-counts.ts';
import { type Progress, type VerifyReport, verifyObjects } from '../lifecycle/verify-content.ts';
import type { ItemKey } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { contentRootId } from '../system/ref-index.ts';
import { openScratch, type Scratch } from '../system/scratch.ts';
import { stateKey } from '../telemetry/queue.ts';
import { isNeverBackedUp, openBackup, type VerifiedBackup } from './backup-format.ts';
import { ObjectSet, refOf } from './object-set.ts';
import type { RestoreRecord } from './restore.ts';

export interface ReconcileFinding {
  kind: 'object' | 'derived' | 'audit' | 'restore' | 'item' | 'unexpected';
  problem: string;
  key?: string;
  digest?: string;
  source?: string;
  row?: string;
  detail: string;
}

export type RestoreSummary = { status: string; items_expected: number; items_missing: number | null; backup_readable: boolean } | null;

/** Findings a report returns (and the totals it counts beyond them). */
export const MAX_REPORTED_FINDINGS = 1000;
const MAX_DETAIL = 300;

export function clip(s: string): string {
  return s.length > MAX_DETAIL ? `${s.slice(0, MAX_DETAIL)}…` : s;
}

/** Findings in order, the first `cap` kept; `total` and `failing` count all of them. */
export class FindingList {
  readonly kept: ReconcileFinding[] = [];
  total = 0;
  failing = 0;
  constructor(private readonly cap = MAX_REPORTED_FINDINGS) {}
  push(...fs: ReconcileFinding[]): void {
    for (const f of fs) {
      this.total++;
      if (f.kind !== 'derived' && f.kind !== 'unexpected') this.failing++;
      if (this.kept.length < this.cap) this.kept.push(f);
    }
  }
  /** Appends another list after this one (its kept findings up to the cap, its counts in full). */
  append(other: FindingList): void {
    for (const f of other.kept) if (this.kept.length < this.cap) this.kept.push(f);
    this.total += other.total;
    this.failing += other.failing;
  }
}

/** Artifact ids on disk, read back in order a page at a time. */
export class IdSet {
  private readonly scratch: Scratch = openScratch('reconcile-artifacts');
  private readonly insert;
  count = 0;
  constructor() {
    this.scratch.db.exec('CREATE TABLE a (id TEXT PRIMARY KEY) WITHOUT ROWID');
    this.insert = this.scratch.db.prepare('INSERT OR IGNORE INTO a (id) VALUES (?)');
  }
  add(ids: readonly string[]): void {
    this.scratch.db.transaction(() => {
      for (const id of ids) this.count += this.insert.run(id).changes;
    })();
  }
  *pages(size = 500): Generator<string[]> {
    const stmt = this.scratch.db.prepare('SELECT id FROM a WHERE id > ? ORDER BY id LIMIT ?');
    let after = '';
    for (;;) {
      const ids = (stmt.all(after, size) as Array<{ id: string }>).map((r) => r.id);
      if (ids.length === 0) return;
      yield ids;
      after = ids[ids.length - 1] as string;
    }
  }
  close(): void {
    this.scratch.close();
  }
}

export interface TableScan {
  refs: ObjectSet;
  artifacts: IdSet;
  /** The versions recounted by state (lifecycle/state-counts.ts), for the counters' check. */
  states: StateRecount;
  conflicts: number;
  itemCount: number;
  close(): void;
}

/** One pass over the base table: references (a key named with two digests is a conflict), artifacts, versions per state, item count. */
export async function scanBaseTable(ctx: ServiceContext, bar: Progress, findings: FindingList): Promise<TableScan> {
  const out: TableScan = {
    refs: new ObjectSet('reconcile-refs'),
    artifacts: new IdSet(),
    states: new StateRecount(),
    conflicts: 0,
    itemCount: 0,
    close: () => {
      out.refs.close();
      out.artifacts.close();
    },
  };
  try {
    let cursor: string | undefined;
    do {
      const page = await ctx.items.scan(cursor ? { cursor } : {});
      out.itemCount += page.items.length;
      out.artifacts.add(page.items.filter((i) => i.PK.startsWith('ART#')).map((i) => i.PK.slice('ART#'.length)));
      out.states.add(page.items);
      for (const { ref: r, seen } of out.refs.add(page.items.flatMap(refsOfItem))) {
        out.conflicts++;
        findings.push({
          kind: 'object',
          problem: 'conflict',
          key: r.key,
          digest: r.digest,
          source: r.source,
          detail: `named with ${r.digest} here and with ${seen.digest} by ${seen.source}`,
        });
      }
      bar.tick?.(page.items.length);
      cursor = page.cursor;
    } while (cursor);
  } catch (e) {
    out.close();
    throw e;
  }
  return out;
}

/** A restore that did not complete: what exactly is missing, from the backup; the objects only it names join `refs`. */
export async function checkHeldRestore(
  ctx: ServiceContext,
  r: RestoreRecord | undefined,
  refs: ObjectSet,
  findings: FindingList,
): Promise<RestoreSummary> {
  if (!r) return null;
  const restoreSummary = {
    status: r.status,
    items_expected: r.items_expected,
    items_missing: null as number | null,
    backup_readable: false,
  };
  if (r.status === 'RESTORED') return restoreSummary;
  findings.push({
    kind: 'restore',
    problem: 'incomplete',
    row: `${restorePk(r.restore_id)} RESTORE`,
    detail: `restore ${r.restore_id} is ${r.status}: it was interrupted; run the restore again to complete it`,
  });
  let backup: VerifiedBackup | undefined;
  try {
    backup = await openBackup(r.backup_location, { expectedManifestDigest: r.manifest_digest });
    restoreSummary.backup_readable = true;
  } catch (e) {
    findings.push({ kind: 'restore', problem: 'unreadable', detail: `backup ${r.backup_location}: ${clip((e as Error).message)}` });
  }
  if (!backup) return restoreSummary;
  restoreSummary.items_missing = await missingItems(ctx, backup, findings);
  let page: ObjectRef[] = [];
  for await (const o of backup.objects()) {
    page.push({
      key: o.key,
      digest: o.digest,
      ...(o.size !== undefined ? { size: o.size } : {}),
      ...(o.retained ? { retained: true as const } : {}),
      source: 'backup manifest',
    });
    if (page.length >= 1000) {
      refs.add(page); // a key the items already name keeps its naming (no conflict is judged here)
      page = [];
    }
  }
  refs.add(page);
  return restoreSummary;
}

/** Items of the backup that the target does not hold (read in chunks of 100): findings, and their count. */
async function missingItems(ctx: ServiceContext, backup: VerifiedBackup, findings: FindingList): Promise<number> {
  let missing = 0;
  let chunk: ItemKey[] = [];
  const check = async () => {
    const found = await ctx.items.batchGet(chunk);
    const have = new Set(found.map((i) => `${i.PK}\u0000${i.SK}`));
    for (const k of chunk) {
      if (have.has(`${k.PK}\u0000${k.SK}`)) continue;
      missing++;
      findings.push({ kind: 'item', problem: 'missing', row: `${k.PK} ${k.SK}`, detail: 'in the backup, not restored' });
    }
    chunk = [];
  };
  for await (const item of backup.items()) {
    if (isNeverBackedUp(item)) continue;
    chunk.push({ PK: item.PK, SK: item.SK });
    if (chunk.length >= 100) await check();
  }
  if (chunk.length) await check();
  return missing;
}

export interface ObjectCounts {
  referenced: number;
  verified: number;
  bytes: number;
  missing: number;
  corrupt: number;
  errors: number;
  derivedChecked: number;
  derivedMismatched: number;
}

/**
 * Objects: re-hash everything named, a page of the set at a time in key order. Immutable objects and
 * the judgement of derived documents decide the status; quarantined objects are reported, never
 * deciding it. A stale derived document is re-derived unless a restore is held.
 */
export async function verifyObjectsPaged(
  ctx: ServiceContext,
  refs: ObjectSet,
  concurrency: number,
  bar: Progress,
  restoreHeld: boolean,
  findings: FindingList,
): Promise<ObjectCounts> {
  const counts: ObjectCounts = {
    referenced: 0,
    verified: 0,
    bytes: 0,
    missing: 0,
    corrupt: 0,
    errors: 0,
    derivedChecked: 0,
    derivedMismatched: 0,
  };
  for (const page of refs.pages('verified')) {
    const r = await verifyInBatches(ctx, page.map(refOf), concurrency, bar);
    counts.referenced += page.length;
    counts.verified += r.ok;
    counts.bytes += r.bytes;
    const superseded = new Set(page.filter((e) => e.superseded).map((e) => e.key));
    for (const f of r.findings) {
      if (f.problem === 'missing' && superseded.has(f.key) && (await reclaimedByRetention(ctx, f.key))) continue;
      if (f.problem === 'missing') counts.missing++;
      else if (f.problem === 'corrupt') counts.corrupt++;
      else if (f.problem === 'error') counts.errors++;
      findings.push({ kind: 'object', ...f, detail: clip(f.detail) });
    }
  }
  for (const page of refs.pages('derived')) {
    const retained = new Set(page.filter((e) => e.retained).map((e) => e.key));
    const r = await verifyInBatches(ctx, page.map(refOf), 1, {});
    counts.derivedChecked += page.length;
    counts.derivedMismatched += r.findings.length + r.stale.length;
    // A quarantined object is only reported; a derived document that is neither current nor stale is corrupt.
    for (const f of r.findings) findings.push({ kind: retained.has(f.key) ? 'derived' : 'object', ...f, detail: clip(f.detail) });
    for (const d of r.stale) {
      const repaired = restoreHeld ? false : await repairDerived(ctx, d.key);
      findings.push({
        kind: 'derived',
        problem: 'stale',
        key: d.key,
        digest: d.digest,
        source: d.source,
        detail: clip(`${d.detail}${repaired ? '; re-derived now' : ''}`),
      });
    }
  }
  return counts;
}

/** Re-derives a stale provenance document; false when that did not happen (reported, not fatal). */
async function repairDerived(ctx: ServiceContext, key: string): Promise<boolean> {
  const artifactId = provenanceArtifactId(key);
  if (artifactId === undefined) return false;
  return publishProvenanceDocument(ctx, artifactId).then(
    () => true,
    () => false,
  );
}

/** Every artifact's audit chain, a page of ids at a time (findings in artifact order), then tail truncation against the append counter. */
export async function verifyChains(
  ctx: ServiceContext,
  artifacts: IdSet,
  concurrency: number,
  findings: FindingList,
): Promise<{ entries: number; broken: number; findings: number }> {
  let entries = 0;
  let broken = 0;
  let count = 0;
  for (const ids of artifacts.pages()) {
    const chains: ChainReport[] = [];
    await forEachLimited(ids, concurrency, async (id) => {
      chains.push(await verifyArtifactAudit(ctx, id));
    });
    chains.sort((a, b) => (a.artifact_id < b.artifact_id ? -1 : 1));
    for (const report of chains) {
      entries += report.entries;
      if (!report.ok) broken++;
      count += report.findings.length;
      for (const f of report.findings) findings.push({ kind: 'audit', problem: 'broken', row: f.row, detail: clip(f.problem) });
    }
  }
  const counter = await checkAuditCounter(ctx);
  if (!counter.ok) {
    broken++;
    count++;
    findings.push({ kind: 'audit', problem: 'truncated', row: `${stateKey.PK} ${stateKey.SK}`, detail: clip(counter.detail) });
  }
  return { entries, broken, findings: count };
}

/** Objects under the immutable prefixes that nothing names (report only), streamed against the set; their count. */
export async function unexpectedObjects(ctx: ServiceContext, named: ObjectSet, findings: FindingList): Promise<number> {
  let n = 0;
  for (const prefix of IMMUTABLE_PREFIXES) {
    for await (const o of ctx.content.list(prefix)) {
      if (named.has(o.key)) continue;
      n++;
      findings.push({ kind: 'unexpected', problem: 'unexpected', key: o.key, detail: `${o.size} bytes that no item names` });
    }
  }
  return n;
}

const VERIFY_BATCH = 32;

/**
 * verifyObjects over batches of references, `concurrency` batches at a time: the reads of one object
 * overlap the hashing of another (and, on S3, the round trips). Findings come back sorted by key.
 */
export async function verifyInBatches(ctx: ServiceContext, refs: ObjectRef[], concurrency: number, bar: Progress): Promise<VerifyReport> {
  // Cold archive copies (S3 GLACIER) are checked by S3's checksum, never read (verifyObjects).
  const total: VerifyReport = { objects: refs.length, bytes: 0, ok: 0, findings: [], stale: [] };
  const batches: ObjectRef[][] = [];
  for (let i = 0; i < refs.length; i += VERIFY_BATCH) batches.push(refs.slice(i, i + VERIFY_BATCH));
  await forEachLimited(batches, concurrency, async (batch) => {
    // Policies are checked with the audit chains (verifyArtifactAudit), once per artifact.
    const r = await verifyObjects(ctx, batch, { tick: (n) => bar.tick?.(n) }, { policies: false });
    total.bytes += r.bytes;
    total.ok += r.ok;
    total.findings.push(...r.findings);
    total.stale.push(...r.stale);
  });
  total.findings.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return total;
}

/**
 * An archived original (its verified archive copy is what the version reads: issue 17 B13) that the
 * retention protocol reclaimed — its observation is PURGED — is absent by design, not a finding. An
 * original missing without that record is still one.
 */
async function reclaimedByRetention(ctx: ServiceContext, key: string): Promise<boolean> {
  const root = contentRootId(ctx.content.location);
  const o = await ctx.items.get({ PK: observationPk(root, key, ctx.layout.index_shards), SK: observationSk(key) }, { consistent: true });
  return o?.state === 'PURGED';
}
