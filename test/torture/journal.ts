/**
 * The "acknowledged" journal of the crash campaign: the worker appends one line per operation that
 * RETURNED success — what it did and the ids, keys and digests it reported — and fsyncs it before it
 * moves on. After a SIGKILL the parent holds the installation to every line: whatever was acknowledged
 * must still be visible. A torn last line (the kill landed inside the append) was never acknowledged.
 */
import fs from 'node:fs';

export type Ack =
  | {
      op: 'create' | 'version';
      artifact_id: string;
      version: number;
      content_key: string;
      content_hash: string;
      size: number;
      metadata_key: string;
      metadata_hash: string;
    }
  | { op: 'transition'; artifact_id: string; version: number; to: string }
  | { op: 'approval'; artifact_id: string; version: number; decision: string; actor: string }
  | { op: 'execution'; run_id: string; artifact_id: string; version: number }
  | { op: 'output'; run_id: string; name: string; key: string; digest: string; size: number }
  | { op: 'finish'; run_id: string; status: string; exit_code: number }
  | {
      op: 'compensation';
      artifact_id: string;
      version: number;
      comp_id: string;
      content_key: string;
      content_hash: string;
      size: number;
    }
  | { op: 'provenance'; artifact_id: string; step: number; hash: string }
  | { op: 'archive'; artifact_id: string; objects: Array<{ archive_key: string; digest: string; size: number }> }
  | { op: 'ack'; ids: string[] }
  | { op: 'backup'; backup_id: string; location: string; manifest_digest: string; with_content: boolean; objects: number }
  | { op: 'retention'; action: string; status: string; quarantined: string[]; purged: string[] };

export type JournalLine = Ack & { run: number; seq: number };

export class JournalWriter {
  private readonly fd: number;
  private seq = 0;
  constructor(
    file: string,
    private readonly run: number,
  ) {
    this.fd = fs.openSync(file, 'a', 0o640);
  }

  /** Appends and fsyncs one acknowledged operation; returns only when it is on disk. */
  append(ack: Ack): void {
    const line = `${JSON.stringify({ ...ack, run: this.run, seq: ++this.seq })}\n`;
    fs.writeSync(this.fd, line);
    fs.fsyncSync(this.fd);
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

/** Every complete line of the journal; a torn final line (a kill inside the append) is dropped. */
export function readJournal(file: string): { lines: JournalLine[]; torn: number } {
  if (!fs.existsSync(file)) return { lines: [], torn: 0 };
  const text = fs.readFileSync(file, 'utf8');
  const lines: JournalLine[] = [];
  let torn = 0;
  const parts = text.split('\n');
  for (const [i, part] of parts.entries()) {
    if (part === '') continue;
    try {
      lines.push(JSON.parse(part) as JournalLine);
    } catch (e) {
      // Only the last line can be torn: anything else is a broken journal.
      if (i !== parts.length - 1) throw new Error(`journal ${file} line ${i + 1} is not JSON: ${String(e)}`);
      torn++;
    }
  }
  return { lines, torn };
}

/** Cuts a torn final line off (the next worker appends after a complete line); returns whether it did. */
export function repairJournal(file: string): boolean {
  if (!fs.existsSync(file)) return false;
  const buf = fs.readFileSync(file);
  if (buf.length === 0 || buf[buf.length - 1] === 0x0a) return false;
  const end = buf.lastIndexOf(0x0a) + 1;
  fs.truncateSync(file, end);
  return true;
}
