/**
 * A line diff (Myers' O((N+M)·D) algorithm, after trimming the common prefix and suffix) and its
 * grouping into hunks with context, for the diff view of two versions of a text artifact.
 */

export type DiffOp =
  | { type: 'eq'; a: number; b: number; text: string }
  | { type: 'del'; a: number; text: string }
  | { type: 'add'; b: number; text: string };

export interface DiffResult {
  ops: DiffOp[];
  added: number;
  removed: number;
  /** True when the texts differ too much for a minimal diff: everything old removed, everything new added. */
  coarse: boolean;
}

/** Splits text into lines; a final newline does not make an extra empty line. */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** The edit script turning `a` into `b`, line by line (1-based line numbers in the ops). */
export function diffLines(a: readonly string[], b: readonly string[], maxEdits = 10_000): DiffResult {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const middle = myers(a, b, start, endA, start, endB, maxEdits);
  const ops: DiffOp[] = [];
  for (let i = 0; i < start; i++) ops.push({ type: 'eq', a: i + 1, b: i + 1, text: a[i] as string });
  let coarse = false;
  if (middle) ops.push(...middle);
  else {
    coarse = true;
    for (let i = start; i < endA; i++) ops.push({ type: 'del', a: i + 1, text: a[i] as string });
    for (let j = start; j < endB; j++) ops.push({ type: 'add', b: j + 1, text: b[j] as string });
  }
  for (let i = endA, j = endB; i < a.length; i++, j++) ops.push({ type: 'eq', a: i + 1, b: j + 1, text: a[i] as string });
  let added = 0;
  let removed = 0;
  for (const op of ops) {
    if (op.type === 'add') added++;
    else if (op.type === 'del') removed++;
  }
  return { ops, added, removed, coarse };
}

function myers(
  a: readonly string[],
  b: readonly string[],
  a0: number,
  a1: number,
  b0: number,
  b1: number,
  maxEdits: number,
): DiffOp[] | null {
  const n = a1 - a0;
  const m = b1 - b0;
  const max = n + m;
  if (max === 0) return [];
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= Math.min(max, maxEdits); d++) {
    trace.push(v.slice(offset - d - 1, offset + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x: number;
      if (k === -d || (k !== d && (v[offset + k - 1] as number) < (v[offset + k + 1] as number))) x = v[offset + k + 1] as number;
      else x = (v[offset + k - 1] as number) + 1;
      let y = x - k;
      while (x < n && y < m && a[a0 + x] === b[b0 + y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    if (found >= 0) break;
  }
  if (found < 0) return null;
  // Walk back through the saved frontiers: trace[d] holds v[-d-1 .. d+1] as it was before step d.
  const ops: DiffOp[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const prev = trace[d] as Int32Array;
    const at = (k: number) => prev[k + d + 1] as number;
    const k = x - y;
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const prevK = down ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
      ops.push({ type: 'eq', a: a0 + x + 1, b: b0 + y + 1, text: a[a0 + x] as string });
    }
    if (down) {
      y--;
      ops.push({ type: 'add', b: b0 + y + 1, text: b[b0 + y] as string });
    } else {
      x--;
      ops.push({ type: 'del', a: a0 + x + 1, text: a[a0 + x] as string });
    }
  }
  while (x > 0 && y > 0) {
    x--;
    y--;
    ops.push({ type: 'eq', a: a0 + x + 1, b: b0 + y + 1, text: a[a0 + x] as string });
  }
  return ops.reverse();
}

export type HunkLine = DiffOp | { type: 'skip'; count: number };

/** The ops with runs of unchanged lines longer than 2×context collapsed to a `skip`. */
export function withContext(ops: readonly DiffOp[], context = 3): HunkLine[] {
  const out: HunkLine[] = [];
  let i = 0;
  while (i < ops.length) {
    if ((ops[i] as DiffOp).type !== 'eq') {
      out.push(ops[i] as DiffOp);
      i++;
      continue;
    }
    let j = i;
    while (j < ops.length && (ops[j] as DiffOp).type === 'eq') j++;
    const run = ops.slice(i, j);
    const keepBefore = i === 0 ? 0 : context;
    const keepAfter = j === ops.length ? 0 : context;
    if (run.length > keepBefore + keepAfter + 1) {
      out.push(...run.slice(0, keepBefore));
      out.push({ type: 'skip', count: run.length - keepBefore - keepAfter });
      out.push(...run.slice(run.length - keepAfter));
    } else out.push(...run);
    i = j;
  }
  return out;
}
