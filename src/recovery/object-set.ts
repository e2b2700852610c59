/**
 * A set of object references on disk (issue 17 item A2, bounded memory): what backup and reconcile
 * collect from a scan of the base table — one entry per key, the first naming wins — held in a scratch
 * working set (system/scratch.ts) instead of the heap, and read back in key order (byte order of the
 * UTF-8 key, as objects.jsonl is sorted) one page at a time. Memory stays flat whatever the count.
 */
import type { Digest } from '../core/digest.ts';
import { isImmutableKey } from '../core/object-keys.ts';
import type { ObjectRef } from '../lifecycle/references.ts';
import { openScratch, type Scratch } from '../system/scratch.ts';

/** An entry: the reference as first named (its source), whether its key is immutable, whether it is quarantined. */
export interface SetEntry {
  key: string;
  digest: Digest;
  size?: number;
  source: string;
  mutable: boolean;
  retained: boolean;
  /** An archived original whose verified copy the item also names (issue 17 B13): its absence is not a finding. */
  superseded: boolean;
}

/** Which entries a page walk returns. */
export type SetFilter = 'all' | 'immutable' | 'verified' | 'derived';

const PAGE = 1000;

interface Row {
  key: string;
  digest: string;
  size: number | null;
  source: string;
  mutable: number;
  retained: number;
  superseded: number;
}

const toEntry = (r: Row): SetEntry => ({
  key: r.key,
  digest: r.digest as Digest,
  ...(r.size !== null ? { size: r.size } : {}),
  source: r.source,
  mutable: r.mutable === 1,
  retained: r.retained === 1,
  superseded: r.superseded === 1,
});

/** The entry as a reference (lifecycle/references.ts ObjectRef). */
export function refOf(e: SetEntry): ObjectRef {
  return {
    key: e.key,
    digest: e.digest,
    ...(e.size !== undefined ? { size: e.size } : {}),
    source: e.source,
    ...(e.retained ? { retained: true as const } : {}),
    ...(e.superseded ? { superseded: true as const } : {}),
  };
}

export class ObjectSet {
  private readonly scratch: Scratch;
  private readonly insert;
  private readonly lookup;
  private readonly supersede;
  count = 0;

  constructor(label: string) {
    this.scratch = openScratch(label);
    const db = this.scratch.db;
    db.exec(`CREATE TABLE o (key TEXT PRIMARY KEY, digest TEXT NOT NULL, size INTEGER, source TEXT NOT NULL,
      mutable INTEGER NOT NULL, retained INTEGER NOT NULL, superseded INTEGER NOT NULL) WITHOUT ROWID`);
    db.exec('CREATE INDEX o_digest ON o (digest)');
    this.insert = db.prepare(
      'INSERT OR IGNORE INTO o (key, digest, size, source, mutable, retained, superseded) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    this.lookup = db.prepare('SELECT * FROM o WHERE key = ?');
    this.supersede = db.prepare('UPDATE o SET superseded = 1 WHERE key = ? AND digest = ?');
  }

  /**
   * Adds references (the first naming of a key wins). Returns those that name an existing key with
   * another digest (conflicts), each with the digest and source already recorded.
   */
  add(refs: readonly ObjectRef[]): Array<{ ref: ObjectRef; seen: SetEntry }> {
    const conflicts: Array<{ ref: ObjectRef; seen: SetEntry }> = [];
    this.scratch.db.transaction(() => {
      for (const r of refs) {
        const mutable = isImmutableKey(r.key) ? 0 : 1;
        const res = this.insert.run(r.key, r.digest, r.size ?? null, r.source, mutable, r.retained ? 1 : 0, r.superseded ? 1 : 0);
        if (res.changes === 1) {
          this.count++;
          continue;
        }
        // Superseded is a fact about the key (the item recording its verified archive copy says so),
        // whichever item named it first: an audit entry naming the same original does not undo it (B13).
        if (r.superseded) this.supersede.run(r.key, r.digest);
        const seen = this.get(r.key);
        if (seen && seen.digest !== r.digest) conflicts.push({ ref: r, seen });
      }
    })();
    return conflicts;
  }

  get(key: string): SetEntry | undefined {
    const row = this.lookup.get(key) as Row | undefined;
    return row ? toEntry(row) : undefined;
  }

  has(key: string): boolean {
    return this.lookup.get(key) !== undefined;
  }

  /** Entries with `digest`, in key order (at most `limit`). */
  withDigest(digest: string, limit = 100): SetEntry[] {
    const rows = this.scratch.db.prepare('SELECT * FROM o WHERE digest = ? ORDER BY key LIMIT ?').all(digest, limit) as Row[];
    return rows.map(toEntry);
  }

  /** How many entries `filter` selects. */
  size(filter: SetFilter): number {
    return (this.scratch.db.prepare(`SELECT count(*) AS n FROM o WHERE ${where(filter)}`).get() as { n: number }).n;
  }

  /** The entries `filter` selects, in key order, a page at a time (keyset pagination: no open cursor across awaits). */
  *pages(filter: SetFilter, pageSize = PAGE): Generator<SetEntry[]> {
    const stmt = this.scratch.db.prepare(`SELECT * FROM o WHERE key > ? AND ${where(filter)} ORDER BY key LIMIT ?`);
    let after = '';
    for (;;) {
      const rows = stmt.all(after, pageSize) as Row[];
      if (rows.length === 0) return;
      yield rows.map(toEntry);
      after = (rows[rows.length - 1] as Row).key;
    }
  }

  close(): void {
    this.scratch.close();
  }
}

/**
 * immutable: what a backup copies (quarantined ones too); verified: what reconcile re-hashes as
 * objects (immutable, not quarantined); derived: provenance documents and quarantined objects.
 */
function where(filter: SetFilter): string {
  if (filter === 'immutable') return 'mutable = 0';
  if (filter === 'verified') return 'mutable = 0 AND retained = 0';
  if (filter === 'derived') return '(mutable = 1 OR retained = 1)';
  return '1 = 1';
}
