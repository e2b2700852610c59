/**
 * Crash recovery of an interrupted purge (seed 004: "Interruption leaves a retryable responsibility
 * record ... Review and retry must occur under maintenance before publishers resume"). Runs as a step
 * of `alp maintenance release` under the taken-over fence: every PREPARED record is reviewed against a
 * fresh reference scan and either completed (its approval was given when it was prepared), cancelled
 * (referenced again, bytes present) or — referenced again with its bytes gone — fails closed, which
 * keeps the fence held. The scan honours the pins recorded with the prepared purges and any pins the
 * recovery was given: a pinned object is cancelled, never unlinked.
 */
import { IntegrityError } from '../core/errors.ts';
import { cond } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import type { MaintenanceHandle } from '../system/fence.ts';
import { keyOfObservation, type Observation } from './model.ts';
import { storedPins } from './pins.ts';
import { normalisePins, recordedPins, storedDigest, unlinkUnpinned } from './purge.ts';
import { type ReferenceScan, scanReferences } from './references.ts';
import { ArtifactRetention } from './retention.ts';

export interface PurgeRecoveryOptions {
  /** Digests to keep besides those recorded with the prepared purges (`alp maintenance release --pin`). */
  pins?: Iterable<string>;
}

export async function recoverPreparedPurges(
  ctx: ServiceContext,
  m: MaintenanceHandle,
  opts: PurgeRecoveryOptions = {},
): Promise<Record<string, unknown>> {
  const observations = await new ArtifactRetention(ctx.items, ctx.content, { clock: ctx.clock, layout: ctx.layout }).observations();
  const prepared = [...observations.values()].filter((o) => o.state === 'PREPARED');
  if (prepared.length === 0) return { prepared: 0 };
  // Stored pins (alp pins) as well: the unlink's last check must honour them too (B8).
  const pins = normalisePins(recordedPins(prepared), opts.pins, await storedPins(ctx.items));
  const scan = await scanReferences(ctx, { pins });
  try {
    return await review(ctx, m, scan, prepared, pins);
  } finally {
    scan.close();
  }
}

/** Completes, cancels or (referenced again, bytes gone) fails closed on every prepared purge. */
async function review(
  ctx: ServiceContext,
  m: MaintenanceHandle,
  scan: ReferenceScan,
  prepared: Observation[],
  pins: string[],
): Promise<Record<string, unknown>> {
  const pinned = new Set(pins);
  const done = { prepared: prepared.length, pins: pins.length, purged: [] as string[], cancelled: [] as string[], kept: [] as string[] };
  for (const o of prepared) {
    const key = keyOfObservation(o);
    const present = scan.object(o.key) !== undefined;
    // A key-only reference fails closed like a digest reference (issue 17 B10): the key is named again.
    const why = scan.referencedWhy(o.key) ?? (!present ? scan.digestWhy(o.digest, o.key) : undefined);
    if (why && !present) {
      throw new IntegrityError(
        `${o.key} (${o.digest}) is referenced again (${why}) but its interrupted purge removed the bytes; restore them before releasing the fence`,
        {
          key: o.key,
          digest: o.digest,
        },
      );
    }
    if (why) {
      await m.commit([{ op: 'delete', key, condition: cond.eq('state', 'PREPARED') }]);
      done.cancelled.push(o.key);
      continue;
    }
    if (present) {
      const actual = await storedDigest(ctx.content, o.key);
      if (actual !== undefined && actual !== o.digest) {
        // The bytes changed since the purge was prepared: not the approved object any more.
        done.kept.push(o.key);
        continue;
      }
      if (actual !== undefined) await unlinkUnpinned(ctx.content, o.key, o.digest, pinned);
    }
    await m.commit([
      {
        op: 'update',
        key,
        update: { set: { state: 'PURGED', purged_at: ctx.clock.now().toISOString(), recovered: true } },
        condition: cond.eq('state', 'PREPARED'),
      },
    ]);
    done.purged.push(o.key);
  }
  return done;
}
