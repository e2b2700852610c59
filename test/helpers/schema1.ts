/**
 * A schema-1 installation from one written by the current code (test/system/migration-execution-keys.test.ts,
 * test/audit/independent-verifier.test.ts): execution output and finish records put back under their
 * schema-1 keys (EXEC#{run}#OUTPUT#{name}, EXEC#{run}#FINISH) through the ItemStore, every chain
 * re-hashed and re-linked as the old code hashed it (the hash covers the SK), the HEAD's head hash set
 * to match, no transparency-log markers, and `schema_version` 1 — what ALP before issue 16 wrote.
 */
import { auditHash } from '../../src/audit/chain.ts';
import { isMarkerRow } from '../../src/audit/tlog/markers.ts';
import { HEAD_SK, INSTALLATION_SK, legacyExecutionFinishSk, legacyExecutionOutputSk, SYS_PK } from '../../src/core/keys.ts';
import { type Item, type ItemStore, queryAll } from '../../src/store/item-store.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { allItems } from './items.ts';

/** The audit types the installation 1 → 2 migration moves. */
export const MOVED = ['execution_output', 'execution_finish'];

export function legacySk(i: Item): string {
  return i.type === 'execution_finish'
    ? legacyExecutionFinishSk(i.run_id as string)
    : legacyExecutionOutputSk(i.run_id as string, i.name as string);
}

/** Rewrites one artifact partition into the schema-1 form, re-hashing and re-linking its chain. */
async function partitionToSchema1(items: ItemStore, pk: string): Promise<void> {
  const all = await queryAll(items, { pk, consistent: true });
  const chain = all
    .filter((i) => typeof i.seq === 'number' && typeof i.hash === 'string')
    .sort((a, b) => (a.seq as number) - (b.seq as number));
  let prev: string | null = null;
  for (const e of chain) {
    const old: Item = { ...e, prev_hash: prev, ...(MOVED.includes(e.type as string) ? { SK: legacySk(e) } : {}) };
    old.hash = auditHash(old);
    prev = old.hash as string;
    await items.put(old);
    if (old.SK !== e.SK) await items.delete({ PK: e.PK, SK: e.SK });
  }
  // Schema 1 predates the transparency log: no HEAD queue or pending flag, no markers (they named the new hashes).
  const unlogged = { tlog_q_first: undefined, tlog_q: undefined, GSI1PK: undefined, GSI1SK: undefined };
  await items.update({ PK: pk, SK: HEAD_SK }, { set: { audit_head_hash: prev, ...unlogged } });
  for (const m of all.filter(isMarkerRow)) await items.delete({ PK: m.PK, SK: m.SK });
}

export async function toSchema1(ctx: ServiceContext): Promise<void> {
  const pks = new Set((await allItems(ctx.items)).filter((i) => i.PK.startsWith('ART#') && i.SK === HEAD_SK).map((i) => i.PK));
  for (const pk of pks) await partitionToSchema1(ctx.items, pk);
  await ctx.items.update({ PK: SYS_PK, SK: INSTALLATION_SK }, { set: { schema_version: 1 } });
}
