/**
 * Audit verification: recomputes every hash of an artifact's chain, checks the links and the HEAD,
 * and cross-checks the live items against what the chain says (a version's state and content, an
 * execution's outputs and status, a compensation's state). Reads the base table and the packed history
 * segments (their digests, that they hold what their items say, and that they agree with any hot copy).
 */
import { NotFound } from '../core/errors.ts';
import { artifactPk, versionSk } from '../core/keys.ts';
import type { HeadItem } from '../core/model.ts';
import type { Item } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { aliasDifferences, aliasEntryProblems } from './alias-chain.ts';
import { auditHash, isAuditType, RESERVATION_PREFIX } from './chain.ts';
import { loadChain } from './history.ts';
import { chainedPolicyProblems, firstChainedPolicy, policyProblems } from './policy.ts';
import { markerProblems } from './tlog/markers.ts';

export interface ChainFinding {
  artifact_id: string;
  row: string;
  problem: string;
}

export interface ChainReport {
  artifact_id: string;
  entries: number;
  ok: boolean;
  findings: ChainFinding[];
}

export async function verifyArtifactAudit(ctx: ServiceContext, artifactId: string): Promise<ChainReport> {
  const findings: ChainFinding[] = [];
  const add = (row: string, problem: string) => findings.push({ artifact_id: artifactId, row, problem });
  const { head, entries, live, segments, conflicts } = await loadChain(ctx, artifactId, { tolerant: true });
  for (const s of segments) if (s.problem) add(`${s.item.PK} ${s.item.SK}`, `packed history segment ${s.item.key}: ${s.problem}`);
  for (let i = 1; i < segments.length; i++) {
    const prev = segments[i - 1] as (typeof segments)[number];
    const cur = segments[i] as (typeof segments)[number];
    if (cur.item.first_seq <= prev.item.last_seq) add(`${cur.item.PK} ${cur.item.SK}`, `packed history segment overlaps ${prev.item.SK}`);
  }
  for (const c of conflicts)
    add(`${c.hot.PK} ${c.hot.SK}`, `entry ${c.seq} differs from its packed copy in a history segment (one of them was edited)`);
  // Nothing at all under the key: no such artifact (not a broken chain, which would be exit 5).
  if (!head && live.length === 0 && entries.length === 0 && segments.length === 0) throw new NotFound(`no artifact ${artifactId}`);
  if (!head) {
    add(`${artifactPk(artifactId)} HEAD`, 'HEAD item missing');
    return { artifact_id: artifactId, entries: entries.length, ok: false, findings };
  }
  let prev: string | null = null;
  entries.forEach((e, i) => {
    const row = `${e.PK} ${e.SK}`;
    if (e.seq !== i + 1) add(row, `sequence ${String(e.seq)} where ${i + 1} was expected (an entry is missing or duplicated)`);
    if (auditHash(e) !== e.hash) add(row, 'hash does not match the row’s contents (the row was edited)');
    if (e.prev_hash !== prev) add(row, `prev_hash does not link to the previous entry (${prev ?? 'none'})`);
    prev = e.hash as string;
  });
  if (head.audit_seq !== entries.length)
    add(`${head.PK} HEAD`, `HEAD says ${head.audit_seq} audit entries, the chain has ${entries.length}`);
  if ((head.audit_head_hash ?? null) !== prev) add(`${head.PK} HEAD`, 'HEAD audit_head_hash is not the hash of the last entry');
  await crossCheck(ctx, head, entries, live, add);
  for (const p of markerProblems(entries, live, head)) add(p.row, p.problem);
  const versions = live.filter((i) => i.type === 'version');
  for (const p of [...chainedPolicyProblems(entries), ...(await policyProblems(ctx, head, firstChainedPolicy(entries), versions))])
    add(p.row, p.problem);
  return { artifact_id: artifactId, entries: entries.length, ok: findings.length === 0, findings };
}

async function crossCheck(
  ctx: ServiceContext,
  head: HeadItem,
  entries: Item[],
  live: Item[],
  add: (row: string, problem: string) => void,
): Promise<void> {
  const transitions = entries.filter((e) => e.type === 'transition');
  for (const v of live.filter((i) => i.type === 'version')) {
    const row = `${v.PK} ${v.SK}`;
    const mine = transitions.filter((t) => t.version === v.version);
    const created = mine.find((t) => t.from === null);
    const last = mine[mine.length - 1];
    if (!created) {
      add(row, 'no creation transition records this version');
      continue;
    }
    for (const f of ['content_hash', 'size', 'filename', 'content_key', 'metadata_key', 'metadata_hash'] as const) {
      if (v[f] !== created[f]) add(row, `${f} differs from the creation record (${String(created[f])})`);
    }
    if (last && v.state !== last.to) add(row, `state ${String(v.state)} differs from the last transition (${String(last.to)})`);
  }
  const outputs = entries.filter((e) => e.type === 'execution_output');
  const finishes = entries.filter((e) => e.type === 'execution_finish');
  for (const x of live.filter((i) => i.type === 'execution')) {
    const row = `${x.PK} ${x.SK}`;
    const recorded = Object.fromEntries(
      outputs.filter((o) => o.run_id === x.run_id).map((o) => [o.name, { key: o.key, digest: o.digest, size: o.size }]),
    );
    if (JSON.stringify(sortKeys(recorded)) !== JSON.stringify(sortKeys((x.outputs as Record<string, unknown>) ?? {})))
      add(row, 'outputs differ from the upload records');
    const finish = finishes.find((f) => f.run_id === x.run_id);
    const expected = finish ? finish.status : 'RUNNING';
    if (x.status !== expected) add(row, `status ${String(x.status)} differs from the chain (${String(expected)})`);
    if (finish && x.exit_code !== finish.exit_code) add(row, 'exit code differs from the finish record');
    if (finish && x.signal !== finish.signal) add(row, 'signal differs from the finish record');
    for (const k of Object.keys(x))
      if (k.startsWith(RESERVATION_PREFIX) && typeof x[k] !== 'string') add(row, `malformed upload reservation ${k}`);
  }
  for (const c of entries.filter((e) => e.type === 'compensation')) {
    const current = live.find((i) => i.SK === c.SK) ?? c;
    const comp = await ctx.items.get({ PK: artifactPk(c.comp_artifact_id as string), SK: versionSk(1) }, { consistent: true });
    if (comp && current.state !== comp.state)
      add(`${c.PK} ${c.SK}`, `state ${String(current.state)} differs from the compensation artifact (${String(comp.state)})`);
  }
  for (const problem of aliasDifferences(head, entries)) add(`${head.PK} HEAD`, problem);
  for (const { entry, problem } of aliasEntryProblems(entries)) add(`${entry.PK} ${entry.SK}`, problem);
}

function sortKeys(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(o)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => [k, v && typeof v === 'object' ? sortKeys(v as Record<string, unknown>) : v]),
  );
}

export function isChainEntry(item: Item): boolean {
  return isAuditType(item.type);
}
