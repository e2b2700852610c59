/**
 * A chain's entries, whichever kind it is (chains.ts): an artifact's audit chain (audit/history.ts
 * loadChain, packed segments included, tolerant of broken ones) or an installation log
 * (audit/chained-log.ts), with how an entry's hash is recomputed.
 */
import { canonicalDigest } from '../../core/canonical-json.ts';
import { type Item, queryAll } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';
import { auditHash } from '../hash.ts';
import { loadChain } from '../history.ts';
import { chainRef } from './chains.ts';

/** A chain's entries by seq and how an entry's hash is recomputed: an artifact's audit chain, or an installation log. */
export async function chainEntries(ctx: ServiceContext, id: string): Promise<{ bySeq: Map<number, Item>; hashOf: (e: Item) => string }> {
  const ref = chainRef(id);
  if (!ref.installation) {
    const { entries } = await loadChain(ctx, id, { tolerant: true });
    return { bySeq: new Map(entries.map((e) => [e.seq as number, e])), hashOf: auditHash };
  }
  const entries = await queryAll(ctx.items, { pk: ref.pk, sk: { beginsWith: ref.entryPrefix as string }, consistent: true });
  const hashOf = (e: Item) => {
    const { hash: _h, ...rest } = e;
    return canonicalDigest(rest);
  };
  return { bySeq: new Map(entries.map((e) => [e.seq as number, e])), hashOf };
}
