/**
 * How an audit transaction carries its sinks' operations (src/audit/chain.ts, docs/design.md §5): the
 * sinks' `ops` first; when one of their conditions fails, that sink's `retry` once (it learns which
 * op failed: a telemetry shard that filled or drained); then every sink's unconditional `fallback`.
 * A sink never blocks the audit write: a failure of the transaction's own operations is rethrown.
 */
import { ConditionFailed } from '../core/errors.ts';
import { MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { AuditEvent, AuditSink, SinkOps } from '../system/context.ts';

/**
 * Each sink's operations for `events`, in registration order, each told the operations the
 * transaction still has (`room` minus what the sinks before it took): an observer that adds nothing
 * (the HTTP server's metrics sink) takes nothing from the telemetry sink's budget.
 */
export async function sinkOpsFor(sinks: readonly AuditSink[], events: AuditEvent[], room: number): Promise<SinkOps[]> {
  const parts: SinkOps[] = [];
  let left = room;
  for (const sink of sinks) {
    const part = await sink.opsFor(events, Math.max(0, left));
    left -= part.ops.length;
    parts.push(part);
  }
  return parts;
}

/** The operations after `parts` with the part that owns sink op `failed` replaced by its retry, or undefined. */
async function retried(parts: SinkOps[], current: TransactOp[][], failed: number): Promise<TransactOp[] | undefined> {
  let offset = 0;
  for (const [k, ops] of current.entries()) {
    if (failed < offset + ops.length) {
      const next = await parts[k]?.retry?.(failed - offset);
      if (!next) return undefined;
      current[k] = next;
      return current.flat();
    }
    offset += ops.length;
  }
  return undefined;
}

/** Commits `core` (through `attempt`) with the sinks' operations, as above. */
export async function commitWithSinks(
  attempt: (sinkOps: TransactOp[]) => Promise<void>,
  parts: SinkOps[],
  coreLength: number,
): Promise<void> {
  const fallback = parts.flatMap((p) => p.fallback);
  const current = parts.map((p) => p.ops);
  const fits = (ops: TransactOp[]) => coreLength + ops.length <= MAX_TRANSACT_OPS;
  let ops = current.flat();
  // Sink operations that would take the transaction past its operation limit use the fallback.
  if (!fits(ops)) ops = fallback;
  let retriedOnce = false;
  for (;;) {
    try {
      await attempt(ops);
      return;
    } catch (e) {
      const failed = e instanceof ConditionFailed && e.failedIndex !== undefined ? e.failedIndex - coreLength : -1;
      if (failed < 0 || ops === fallback) throw e;
      const next = retriedOnce ? undefined : await retried(parts, current, failed);
      retriedOnce = true;
      ops = next && fits(next) ? next : fallback;
    }
  }
}
