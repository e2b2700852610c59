import type { ContentStore } from '../content/content-store.ts';
import type { Clock } from '../core/clock.ts';
import type { ItemStore, TransactOp } from '../store/item-store.ts';
import type { ProcessInstance } from './instance.ts';

/**
 * What every service operation receives: the two contracts, the clock, and the hooks that other
 * services plug into the audit transaction (the telemetry outbox). Entry points build one per process.
 */
export interface ServiceContext {
  items: ItemStore;
  content: ContentStore;
  clock: Clock;
  /** Extra operations added to every audit transaction (e.g. telemetry enqueue). */
  auditSinks: AuditSink[];
  /** The process instance that owns this context's upload reservations (default: this process). */
  instance?: ProcessInstance;
}

export interface AuditEvent {
  event_id: string;
  type: string;
  aggregate_id: string;
  timestamp: string;
}

/**
 * A sink adds `ops` to the audit transaction. If one of its conditions fails (a full queue), the
 * transaction is retried with `fallback` instead, so the audit write itself always commits.
 */
export interface AuditSink {
  opsFor(events: AuditEvent[]): Promise<{ ops: TransactOp[]; fallback: TransactOp[] }>;
}

export function createContext(parts: Pick<ServiceContext, 'items' | 'content' | 'clock'> & Partial<ServiceContext>): ServiceContext {
  return { auditSinks: [], ...parts };
}
