/**
 * Text arriving in chunks, kept as numbered lines: complete lines in blocks (one per chunk, so a view
 * re-renders only the new block), the unterminated end carried into the next chunk. And the search
 * within the loaded lines.
 */

export interface LineBuffer {
  /** Complete lines, one block per appended chunk (a block is never changed once added). */
  blocks: string[][];
  /** Complete lines in all blocks. */
  count: number;
  /** The text after the last newline (a line not finished yet, or the last line of the content). */
  pending: string;
}

export const emptyLines = (): LineBuffer => ({ blocks: [], count: 0, pending: '' });

export function appendText(buf: LineBuffer, text: string): LineBuffer {
  if (text === '') return buf;
  const parts = (buf.pending + text).split('\n');
  const pending = parts.pop() as string;
  if (parts.length === 0) return { ...buf, pending };
  return { blocks: [...buf.blocks, parts], count: buf.count + parts.length, pending };
}

export function linesOf(text: string): LineBuffer {
  return appendText(emptyLines(), text);
}

/** Every line of the buffer, the unterminated end last (when it holds anything). */
export function allLines(buf: LineBuffer): string[] {
  const out = buf.blocks.flat();
  if (buf.pending !== '') out.push(buf.pending);
  return out;
}

/** The 0-based indexes of the lines holding `query` (case-insensitive); none for an empty query. */
export function matchingLines(lines: string[], query: string): number[] {
  const q = query.toLowerCase();
  if (q === '') return [];
  const out: number[] = [];
  for (let i = 0; i < lines.length; i++) if ((lines[i] as string).toLowerCase().includes(q)) out.push(i);
  return out;
}

export type Highlighted = Array<{ text: string; hit: boolean }>;

/** A line cut around each occurrence of `query` (case-insensitive). */
export function highlight(line: string, query: string): Highlighted {
  if (query === '') return [{ text: line, hit: false }];
  // Lower-casing can change a string's length (a few scripts): then the case must match.
  const folds = line.toLowerCase().length === line.length && query.toLowerCase().length === query.length;
  const q = folds ? query.toLowerCase() : query;
  const lower = folds ? line.toLowerCase() : line;
  const out: Highlighted = [];
  let at = 0;
  for (let i = lower.indexOf(q); i !== -1; i = lower.indexOf(q, i + q.length)) {
    if (i > at) out.push({ text: line.slice(at, i), hit: false });
    out.push({ text: line.slice(i, i + q.length), hit: true });
    at = i + q.length;
  }
  if (at < line.length || out.length === 0) out.push({ text: line.slice(at), hit: false });
  return out;
}
