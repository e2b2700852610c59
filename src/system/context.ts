/**
 * What every service operation receives: the two contracts, the clock, and the registrations other
 * services plug into the shared paths (audit sinks and publish checks into every audit transaction,
 * recovery steps into maintenance crash recovery). `runtime/context.ts` builds the context every
 * entry point and test uses and registers the services' hooks there, so no service imports another
 * to reach a hook (docs/design.md, layers).
 */
import type { ContentStore } from '../content/content-store.ts';
import type { Clock } from '../core/clock.ts';
import type { Item, ItemStore, TransactOp } from '../store/item-store.ts';
import type { MaintenanceHandle } from './fence.ts';
import type { InstallationKeySource } from './key-source.ts';
import type { Layout } from './layout.ts';
import { UNSHARDED } from './layout.ts';
import type { Signer } from './signing-key.ts';

/** One process that owns upload reservations (lifecycle/instance.ts). */
export interface ProcessInstance {
  id: string;
  host: string;
  pid: number;
}

export interface ServiceContext {
  items: ItemStore;
  content: ContentStore;
  clock: Clock;
  /** Extra operations added to every audit transaction (e.g. telemetry enqueue). */
  auditSinks: AuditSink[];
  /**
   * Checks added to every audit transaction that makes uploaded object keys referenced (the retention
   * publisher guard, registered by runtime/). A failed check refuses the commit.
   */
  publishChecks: PublishCheck[];
  /** The steps maintenance crash recovery runs, in order (system/recovery.ts; registered by runtime/). */
  recoverySteps: MaintenanceRecoveryStep[];
  /** The process instance that owns this context's upload reservations (default: this process). */
  instance?: ProcessInstance;
  /** The installation's write layout (system/layout.ts): shard counts, fixed at creation. */
  layout: Layout;
  /**
   * Where the installation's signing key comes from (system/installation-key.ts; chosen by runtime/):
   * absent when none is configured, and then only what must sign fails.
   */
  signingKey?: InstallationKeySource;
  /**
   * The installation key's recorded history (audit/key-history.ts; registered by runtime/):
   * installationSigner reconciles every signer it opens with it and checks a memoized one against it.
   */
  keyHistory?: KeyHistory;
  /**
   * Whether audit transactions write the transparency log's pending markers (audit/tlog/markers.ts):
   * on unless false (runtime/ sets false for ALP_TLOG_MARKERS=off, a benchmark's reference run only).
   */
  tlogMarkers?: boolean;
  /**
   * Told the entries of every audit transaction once it committed, after the sinks (the server's
   * transparency-log loop asks for a round). Observation only; never counted as a sink.
   */
  commitObservers?: Array<(entries: readonly Item[]) => void>;
  /**
   * Told, as one line, about something the services repaired on their own that an operator should
   * know (a leftover pending signing key removed: audit/key-history.ts). The CLI writes it on stderr
   * as `alp: warning: …`; absent, nothing is said.
   */
  warn?: (message: string) => void;
}

/** How an opened installation signer is held to the key history (audit/key-history.ts). */
export interface KeyHistory {
  /**
   * Reconciles a signer just opened from `source` with the history and gives the one to use: records
   * the first key (KEY_ACTIVATED) or a key the source changed to (KEY_ROTATED, not cross-signed),
   * finishes a rotation a crash interrupted, refuses a retired key.
   */
  adopt(ctx: ServiceContext, source: InstallationKeySource, signer: Signer): Promise<Signer>;
  /** Whether `signer` is still the recorded current key (one consistent read). */
  isCurrent(ctx: ServiceContext, signer: Signer): Promise<boolean>;
}

export interface AuditEvent {
  event_id: string;
  type: string;
  aggregate_id: string;
  timestamp: string;
  /**
   * False for an event that is not an entry of an artifact's audit chain (a pin change: the pins keep
   * their own log), which the installation-wide append counter (src/audit/counter.ts) must not count.
   */
  chained?: false;
  /** A chain entry's seq and hash (audit/chain.ts sets them): the transparency log's markers need them. */
  seq?: number;
  hash?: string;
}

/**
 * What a sink adds to one audit transaction. If a condition of `ops` fails (a telemetry shard filled
 * or drained since the sink last looked), `retry` is told which of its ops failed and may give the
 * operations to try once instead (the sink learns the outcome that way); when it gives none or they
 * fail too, the transaction is retried with `fallback`, which has no condition that can fail, so the
 * audit write itself always commits.
 */
export interface SinkOps {
  ops: TransactOp[];
  fallback: TransactOp[];
  retry?(failedOp: number): TransactOp[] | undefined | Promise<TransactOp[] | undefined>;
}

export interface AuditSink {
  /** `budget`: the operations the transaction has left for this sink (its ops and fallback fit in it). */
  opsFor(events: AuditEvent[], budget?: number): Promise<SinkOps>;
  /**
   * Told the audit entries of a transaction once it committed (the HTTP server's transitions metric).
   * Observation only: a sink that throws here never fails the committed write.
   */
  committed?(entries: readonly Item[]): void;
}

/** The check operations a commit that publishes `keys` (object keys in `content`) must also pass (`layout`: ctx.layout). */
export type PublishCheck = (content: ContentStore, keys: readonly string[], layout: Layout) => TransactOp[];

/** What the operator gives a recovery besides the epoch. */
export interface RecoveryOptions {
  /** Digests to keep: honoured by every step that could unlink content (with the pins it recorded). */
  pins?: string[];
}

/** A step of maintenance crash recovery (system/recovery.ts), registered on the context by runtime/. */
export interface MaintenanceRecoveryStep {
  name: string;
  /** Runs under the taken-over fence; `m.abandoned` is the fence the crashed maintenance left. */
  run(ctx: ServiceContext, m: MaintenanceHandle, opts: RecoveryOptions): Promise<Record<string, unknown> | undefined>;
}

export type ContextParts = Pick<ServiceContext, 'items' | 'content' | 'clock'> & Partial<ServiceContext>;

/**
 * A context with no registrations unless `parts` brings them. Entry points and tests use
 * `runtime/context.ts` createContext, which registers the services' hooks; a service that needs a
 * context of its own derives it from the one it was given (`{ ...ctx, clock }`) or uses this.
 */
export function createContext(parts: ContextParts): ServiceContext {
  return { auditSinks: [], publishChecks: [], recoverySteps: [], layout: { ...UNSHARDED }, ...parts };
}
