/**
 * The registered schema migrations, in order. A migration moves one schema component (the
 * installation record's `schema_version`, the telemetry queue's `schema`) from `from` to `from + 1`.
 * `checkSchema` (`./schema.ts`) runs the ones an older installation needs when it is opened, then
 * records the new version with a condition on the old one.
 *
 * Rules for a migration (docs/design.md, "Schema versions"):
 * - idempotent: running it twice, or after a crash half-way, or racing another node, gives the same
 *   result (use conditional writes; skip items already in the new shape);
 * - it reads and writes only through the ItemStore contract, so it runs on both engines, and it has a
 *   test on SQLite and on DynamoDB Local;
 * - it never rewrites a committed immutable item or an audit item (docs/invariants.md).
 *
 * A moved audit entry keeps its hashed content: it carries `moved_from_sk` (the key it was hashed
 * under) and is verified with that key (src/audit/hash.ts, docs/audit-format.md §2 "Moved entries").
 *
 * Registered: `installation-2-execution-record-keys` (schema 1 → 2, issue 16 item 9), in
 * ./migrations/execution-keys.ts; `installation-3-search-entries` (schema 2 → 3, issue 20 item 6: the
 * search entries of artifacts created before search), in ./migrations/search-entries.ts.
 */
import type { ItemStore } from '../store/item-store.ts';
import { moveExecutionRecords } from './migrations/execution-keys.ts';
import { backfillSearchEntries } from './migrations/search-entries.ts';

/** The versioned parts of an installation's layout. */
export type SchemaComponent = 'installation' | 'telemetry_queue';

export interface Migration {
  /** A stable name, shown in errors and in `checkSchema`'s report. */
  id: string;
  component: SchemaComponent;
  /** The stored version this migration upgrades from; it leaves the data at `from + 1`. */
  from: number;
  /** Idempotent: may run again after a crash or on a racing node. */
  run(items: ItemStore): Promise<void>;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    id: 'installation-2-execution-record-keys',
    component: 'installation',
    from: 1,
    run: async (items) => {
      await moveExecutionRecords(items);
    },
  },
  {
    id: 'installation-3-search-entries',
    component: 'installation',
    from: 2,
    run: async (items) => {
      await backfillSearchEntries(items);
    },
  },
];
