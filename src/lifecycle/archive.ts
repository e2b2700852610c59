/**
 * Archive: for an artifact whose versions are all settled, copy every object it names (version
 * content, metadata snapshots, execution outputs) to archive/{yyyy}/{mm}/{id}/… (GLACIER where the
 * engine has classes), verify each copy, then in one transaction record the archive keys and move
 * every version to ARCHIVED. Originals stay: only the retention protocol may remove them.
 */
import { AUDIT_RESERVED_OPS, runAudited } from '../audit/chain.ts';
import type { Digest } from '../core/digest.ts';
import { Conflict } from '../core/errors.ts';
import { archiveKey } from '../core/object-keys.ts';
import { cond, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced } from '../system/fence.ts';
import { assertActor } from './access.ts';
import { listExecutions } from './executions.ts';
import type { ArchivedObject, HeadItem, Principal } from './model.ts';
import { merge, type Planned, planMove } from './moves.ts';
import { SETTLED_STATES } from './state-machine.ts';
import { listVersions } from './versions.ts';

export async function archiveArtifact(ctx: ServiceContext, actor: Principal, artifactId: string): Promise<{ archived: ArchivedObject[] }> {
  assertActor('archive', actor);
  await assertNotFenced(ctx);
  const versions = await listVersions(ctx.items, artifactId);
  const unsettled = versions.filter((v) => !SETTLED_STATES.includes(v.state));
  if (unsettled.length) {
    throw new Conflict(
      `artifact ${artifactId} has versions that are not settled: ${unsettled.map((v) => `v${v.version} ${v.state}`).join(', ')}`,
    );
  }
  const executions = await listExecutions(ctx, artifactId);
  const at = ctx.clock.now();
  const copies: Array<ArchivedObject & { owner: { PK: string; SK: string } }> = [];
  const plan = (original: string, digest: Digest, size: number | undefined, owner: { PK: string; SK: string }) =>
    copies.push({ original_key: original, archive_key: archiveKey(at, artifactId, original), digest, size: size ?? -1, owner });
  for (const v of versions) {
    plan(v.content_key, v.content_hash, v.size, v);
    plan(v.metadata_key, v.metadata_hash, undefined, v);
  }
  for (const e of executions) for (const o of Object.values(e.outputs)) plan(o.key, o.digest as Digest, o.size, e);
  for (const c of copies) {
    const written = await ctx.content.copy(c.original_key, c.archive_key, { expectedDigest: c.digest, storageClass: 'GLACIER' });
    c.size = written.size;
    // Read the copy back through the verifying path before anything points at it.
    for await (const _ of await ctx.content.get(c.archive_key, c.digest, { expectedSize: written.size })) {
    }
  }
  const archived: ArchivedObject[] = copies.map(({ owner: _o, ...rest }) => rest);
  await runAudited(ctx, [artifactId], async (heads) => {
    const head = heads[artifactId] as HeadItem;
    if (head.archived) throw new Conflict(`artifact ${artifactId} is already archived`);
    const current = await listVersions(ctx.items, artifactId);
    if (current.length !== versions.length) throw new Conflict(`artifact ${artifactId} gained a version while archiving; retry`);
    const stamp = at.toISOString();
    const parts: Planned[] = current.map((v) => {
      const mine = archived.filter((a) => copies.find((c) => c.archive_key === a.archive_key)?.owner.SK === v.SK);
      const contentCopy = mine.find((a) => a.original_key === v.content_key);
      return planMove(head, v, 'ARCHIVED', 'archive', actor, stamp, {
        reason: 'archived',
        set: { archive_objects: mine, ...(contentCopy ? { archive_key: contentCopy.archive_key } : {}) },
      });
    });
    const execOps: TransactOp[] = executions.map((e) => ({
      op: 'update',
      key: { PK: e.PK, SK: e.SK },
      update: { set: { archive_objects: archived.filter((a) => copies.find((c) => c.archive_key === a.archive_key)?.owner.SK === e.SK) } },
      condition: cond.exists(),
    }));
    const merged = merge(...parts);
    if (merged.ops.length + merged.entries.length + execOps.length + archived.length + AUDIT_RESERVED_OPS > MAX_TRANSACT_OPS) {
      throw new Conflict(`artifact ${artifactId} has too many versions and runs to archive in one transaction`);
    }
    return {
      chains: [{ artifactId, entries: merged.entries, headSet: { archived: { at: stamp, objects: archived } } }],
      ops: [...merged.ops, ...execOps],
      published: archived.map((a) => a.archive_key),
    };
  });
  return { archived };
}
