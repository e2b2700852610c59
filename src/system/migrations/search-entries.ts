/**
 * The search entries' backfill (issue 20 item 6 leftover; docs/design.md "Aliases and search"): an
 * artifact created before search existed has no `search_entry` (ARTNAME#{id} / SEARCH), so a search
 * without a state missed it. This pass scans the base table for HEADs and writes each missing entry
 * (core/search-entry.ts, the shape the creating transaction writes), conditioned on its absence.
 *
 * It runs as migration installation 2 → 3 (system/migrations.ts: every opening of an older
 * installation runs it once, then records schema 3, which an older ALP — one that creates artifacts
 * without entries — refuses to open) and as `alp search reindex` (the operator's: progress, `--restart`).
 *
 * - Idempotent: an entry that exists is never rewritten (read first, put with attribute_not_exists;
 *   a racing writer — the creating transaction, another node's backfill — makes the put fail, counted
 *   `already`). Entries are never deleted. A second pass writes nothing.
 * - Resumable: after every page the scan cursor is saved in the mark `SYS#installation /
 *   SEARCH_BACKFILL` (state `running`); a run that finds a running mark continues from its cursor (a
 *   crash redoes at most one page, harmlessly). A finished pass leaves state `done` without a cursor;
 *   the next run starts a new pass. No clock is read (a migration has none): the mark holds counts.
 * - Both engines: only the ItemStore contract (scan, batchGet, put, get).
 *
 * Cost: one scan of the base table (every item, page by page; a DynamoDB Scan reads the whole table),
 * plus one batchGet per page of HEADs and one conditional put per missing entry.
 */
import { ConditionFailed } from '../../core/errors.ts';
import { artifactNamePk, HEAD_SK, INSTALLATION_SK, SEARCH_SK, SYS_PK } from '../../core/keys.ts';
import type { HeadItem } from '../../core/model.ts';
import { searchEntryItem } from '../../core/search-entry.ts';
import { cond, type Item, type ItemKey, type ItemStore } from '../../store/item-store.ts';
import { layoutOf } from '../layout.ts';

/** The backfill's mark (progress and resume point), beside the installation record. */
export const SEARCH_BACKFILL_KEY: Readonly<ItemKey> = Object.freeze({ PK: SYS_PK, SK: 'SEARCH_BACKFILL' });

export interface BackfillReport {
  /** Items scanned by this run. */
  scanned: number;
  /** HEADs (artifacts) among them. */
  heads: number;
  /** Entries this run wrote. */
  written: number;
  /** HEADs whose entry was there already (or was written meanwhile by someone else). */
  already: number;
  /** Whether this run continued an interrupted pass (from the mark's cursor). */
  resumed: boolean;
  /** Totals of the whole pass, across resumptions (the mark's counts). */
  pass: { scanned: number; written: number; pages: number };
}

export interface BackfillOptions {
  /** Ignore an interrupted pass's cursor and start from the beginning. */
  restart?: boolean;
  /** Scan page size (default 500). */
  pageSize?: number;
  /** Called after each page, once its mark is saved (progress; a test injects a crash by throwing). */
  onPage?: (report: BackfillReport) => void;
}

interface Mark {
  cursor: string | undefined;
  scanned: number;
  written: number;
  pages: number;
}

export async function backfillSearchEntries(items: ItemStore, opts: BackfillOptions = {}): Promise<BackfillReport> {
  const shards = layoutOf(await items.get({ PK: SYS_PK, SK: INSTALLATION_SK }, { consistent: true })).index_shards;
  const mark = opts.restart ? undefined : await readMark(items);
  const pass: Mark = mark ?? { cursor: undefined, scanned: 0, written: 0, pages: 0 };
  const report: BackfillReport = { scanned: 0, heads: 0, written: 0, already: 0, resumed: mark !== undefined, pass };
  let cursor = pass.cursor;
  do {
    const page = await items.scan({ ...(cursor ? { cursor } : {}), limit: opts.pageSize ?? 500 });
    const heads = page.items.filter(isHead);
    const wrote = await writeMissing(items, heads, shards);
    report.scanned += page.items.length;
    report.heads += heads.length;
    report.written += wrote;
    report.already += heads.length - wrote;
    cursor = page.cursor;
    Object.assign(pass, { cursor, scanned: pass.scanned + page.items.length, written: pass.written + wrote, pages: pass.pages + 1 });
    await saveMark(items, pass);
    opts.onPage?.(report);
  } while (cursor);
  return report;
}

/** The mark of an interrupted pass, or undefined (none, or the last pass finished). */
async function readMark(items: ItemStore): Promise<Mark | undefined> {
  const m = await items.get(SEARCH_BACKFILL_KEY, { consistent: true });
  if (m?.state !== 'running' || typeof m.cursor !== 'string') return undefined;
  return { cursor: m.cursor, scanned: Number(m.scanned) || 0, written: Number(m.written) || 0, pages: Number(m.pages) || 0 };
}

async function saveMark(items: ItemStore, pass: Mark): Promise<void> {
  await items.put({
    ...SEARCH_BACKFILL_KEY,
    type: 'search_backfill',
    state: pass.cursor ? 'running' : 'done',
    ...(pass.cursor ? { cursor: pass.cursor } : {}),
    scanned: pass.scanned,
    written: pass.written,
    pages: pass.pages,
  });
}

function isHead(item: Item): item is Item & HeadItem {
  return item.SK === HEAD_SK && item.type === 'head' && item.PK.startsWith('ART#') && typeof item.artifact_id === 'string';
}

/** Writes the entries these HEADs lack; returns how many this call wrote. */
async function writeMissing(items: ItemStore, heads: HeadItem[], shards: number): Promise<number> {
  if (heads.length === 0) return 0;
  const keys = heads.map((h) => ({ PK: artifactNamePk(h.artifact_id), SK: SEARCH_SK }));
  const present = new Set<string>();
  for (let i = 0; i < keys.length; i += 100) {
    for (const e of await items.batchGet(keys.slice(i, i + 100), { consistent: true })) present.add(e.PK);
  }
  let wrote = 0;
  for (const head of heads) {
    const entry = searchEntryItem(head, shards);
    if (present.has(entry.PK)) continue;
    try {
      await items.put(entry, { condition: cond.notExists() });
      wrote++;
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
    }
  }
  return wrote;
}
