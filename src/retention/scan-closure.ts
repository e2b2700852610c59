/**
 * The transitive closure of the reference scan, in SQL over the working set (scan-workset.ts): fresh
 * references (keys, prefixes, typed references, digests added since the last round) mark the listed
 * objects they name; marked objects whose inner digests are known are expanded (their own digest and
 * the digests inside them become references); marked objects whose inner digests are unknown are
 * returned to the caller to read. Each round touches only what is fresh, through the indexes: the cost
 * is the size of the reference graph, never a pass over the installation per round.
 */
import type { ObjectRow, Workset } from './scan-workset.ts';
import { prefixEnd } from './scan-workset.ts';

/**
 * Archived originals (sup_keys) whose verified copy is listed are not marked by a non-strict digest:
 * the copy holds the same bytes and satisfies the reference (issue 17 B13).
 */
const NOT_SUPERSEDED = `NOT EXISTS (SELECT 1 FROM sup_keys s JOIN objects c ON c.key = s.copy
  WHERE s.key = objects.key AND (c.digest IS NULL OR c.digest = s.digest))`;

/** Why an object is kept by its digest: the digest's reason, or a pin's own reason when a pin is what counts. */
const DIGEST_WHY = `'its digest is ' || (SELECT d.why FROM digests d WHERE d.digest = objects.digest)`;
const STRICT_DIGEST_WHY = `'its digest is ' || (SELECT COALESCE(d.strict_why, d.why) FROM digests d WHERE d.digest = objects.digest)`;

/**
 * Applies every fresh reference to the listing; returns how many objects became referenced. The first
 * round of a whole scan (Workset.wholeRound) applies every reference, none of which is marked.
 */
export function markFresh(ws: Workset): number {
  const db = ws.db;
  const whole = ws.wholeRound;
  /** The fresh ones (`alias.fresh = 1`), or all of them in a whole round. */
  const isFresh = (alias = '') => (whole ? '1' : `${alias}fresh = 1`);
  /** Unmarks what a round applied (nothing is marked in a whole round). */
  const unmark = (table: string) => {
    if (!whole) db.exec(`UPDATE ${table} SET fresh = 0 WHERE fresh = 1`);
  };
  const marked = ws.tx(() => {
    let marked = 0;
    // A typed reference not satisfied by its own object (absent, or other bytes) names its digest.
    db.exec(`INSERT OR IGNORE INTO digests(digest, why)
      SELECT t.digest, t.why FROM typed t LEFT JOIN objects o ON o.key = t.key
      WHERE ${isFresh('t.')} AND (o.key IS NULL OR o.digest IS NULL OR o.digest != t.digest)`);
    unmark('typed');
    marked += db
      .prepare(
        `UPDATE objects SET why = (SELECT k.why FROM keyrefs k WHERE k.key = objects.key)
         WHERE why IS NULL AND key IN (SELECT key FROM keyrefs WHERE ${isFresh()})`,
      )
      .run().changes;
    unmark('keyrefs');
    const byPrefix = db.prepare('UPDATE objects SET why = ? WHERE why IS NULL AND key >= ? AND key < ?');
    for (const p of db.prepare(`SELECT prefix, why FROM prefixes WHERE ${isFresh()}`).all() as Array<{ prefix: string; why: string }>) {
      marked += byPrefix.run(p.why, p.prefix, prefixEnd(p.prefix)).changes;
    }
    unmark('prefixes');
    marked += db
      .prepare(
        `UPDATE objects SET why = ${STRICT_DIGEST_WHY}
         WHERE why IS NULL AND digest IN (SELECT digest FROM digests WHERE ${isFresh()} AND strict = 1)`,
      )
      .run().changes;
    marked += db
      .prepare(
        `UPDATE objects SET why = ${DIGEST_WHY}
         WHERE why IS NULL AND digest IN (SELECT digest FROM digests WHERE ${isFresh()}) AND ${NOT_SUPERSEDED}`,
      )
      .run().changes;
    // In a whole round, the digests the typed references named above are marked: the next round applies them again (idempotent).
    unmark('digests');
    return marked;
  });
  ws.wholeRound = false;
  return marked;
}

/**
 * Rows a scan from the cache listed as new (fresh = 1, scan-diff.ts) matched against every reference,
 * fresh or not (an old reference to a new object); then they are rows like any other.
 */
export function markNew(ws: Workset): number {
  const db = ws.db;
  return ws.tx(() => {
    let marked = 0;
    db.exec(`INSERT OR IGNORE INTO digests(digest, why)
      SELECT t.digest, t.why FROM objects o INDEXED BY objects_fresh JOIN typed t ON t.key = o.key
      WHERE o.fresh = 1 AND (o.digest IS NULL OR o.digest != t.digest)`);
    marked += db
      .prepare(
        `UPDATE objects INDEXED BY objects_fresh SET why = (SELECT k.why FROM keyrefs k WHERE k.key = objects.key)
         WHERE fresh = 1 AND why IS NULL AND EXISTS (SELECT 1 FROM keyrefs k WHERE k.key = objects.key)`,
      )
      .run().changes;
    const byPrefix = db.prepare('UPDATE objects SET why = ? WHERE fresh = 1 AND why IS NULL AND key >= ? AND key < ?');
    for (const p of db.prepare('SELECT prefix, why FROM prefixes').all() as Array<{ prefix: string; why: string }>) {
      marked += byPrefix.run(p.why, p.prefix, prefixEnd(p.prefix)).changes;
    }
    const byDigest = (strictOnly: boolean) =>
      db
        .prepare(
          `UPDATE objects INDEXED BY objects_fresh SET why = ${strictOnly ? STRICT_DIGEST_WHY : DIGEST_WHY}
           WHERE fresh = 1 AND why IS NULL AND EXISTS (SELECT 1 FROM digests d WHERE d.digest = objects.digest${strictOnly ? ' AND d.strict = 1' : ''})
           ${strictOnly ? '' : `AND ${NOT_SUPERSEDED}`}`,
        )
        .run().changes;
    marked += byDigest(true) + byDigest(false);
    db.exec('UPDATE objects SET fresh = 0 WHERE fresh = 1');
    return marked;
  });
}

/** Referenced objects whose inner digests are known: their digests become references. Returns how many. */
export function expandKnown(ws: Workset): number {
  const db = ws.db;
  return ws.tx(() => {
    db.exec(`INSERT OR IGNORE INTO digests(digest, why)
      SELECT o.digest, 'digest of referenced object ' || o.key FROM objects o INDEXED BY objects_known
      WHERE o.why IS NOT NULL AND o.inner = 1 AND o.digest IS NOT NULL`);
    db.exec(`INSERT OR IGNORE INTO digests(digest, why)
      SELECT i.digest, 'found inside ' || o.key FROM objects o JOIN inner i ON i.key = o.key
      WHERE o.why IS NOT NULL AND o.inner = 1`);
    return db.prepare('UPDATE objects SET inner = 2 WHERE why IS NOT NULL AND inner = 1').run().changes;
  });
}

/** Referenced objects whose inner digests are not known yet (the caller reads them), at most `limit`. */
export function unknownReferenced(ws: Workset, limit: number): ObjectRow[] {
  return ws.db
    .prepare('SELECT key, size, cls, cold, digest, inner, bad FROM objects WHERE why IS NOT NULL AND inner = 0 ORDER BY key LIMIT ?')
    .all(limit) as ObjectRow[];
}

/** A referenced object whose bytes do not hash to the digest the items record, if any. */
export function referencedBad(ws: Workset): ObjectRow | undefined {
  return ws.db
    .prepare('SELECT key, size, cls, cold, digest, inner, bad FROM objects WHERE why IS NOT NULL AND bad IS NOT NULL LIMIT 1')
    .get() as ObjectRow | undefined;
}

/** A readable (not cold) listed object with `digest` whose inner digests are known: a cold copy's twin. */
export function readableTwin(ws: Workset, digest: string): string | undefined {
  return ws.db
    .prepare('SELECT key FROM objects WHERE digest = ? AND cold = 0 AND inner >= 1 AND bad IS NULL LIMIT 1')
    .pluck()
    .get(digest) as string | undefined;
}

export function innerOf(ws: Workset, key: string): string[] {
  return ws.db.prepare('SELECT digest FROM inner WHERE key = ? ORDER BY digest').pluck().all(key) as string[];
}
