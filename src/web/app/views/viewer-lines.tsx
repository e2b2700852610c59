/**
 * The byte viewer's text: numbered lines rendered one block per loaded chunk (a block never
 * re-renders unless a search touches it), and the search within the loaded lines.
 */
import { Component } from 'preact';
import { useEffect, useId, useMemo, useState } from 'preact/hooks';
import { allLines, highlight, type LineBuffer, matchingLines } from '../lib/lines.ts';

/** Where a line is: the head (numbered from 1) or the tail (loaded from the end; its numbers are not known). */
export interface LineRef {
  key: string;
  block: number;
}

interface BlockProps {
  lines: string[];
  /** The first line's number; undefined: not known (the tail, before the middle is loaded). */
  first: number | undefined;
  prefix: string;
  query: string;
  current: string | undefined;
}

class Block extends Component<BlockProps> {
  override shouldComponentUpdate(next: BlockProps): boolean {
    const p = this.props;
    return next.lines !== p.lines || next.query !== p.query || next.current !== p.current || next.first !== p.first;
  }
  override render({ lines, first, prefix, query, current }: BlockProps) {
    return (
      <>
        {lines.map((line, i) => {
          const key = `${prefix}${i}`;
          const parts = query ? highlight(line, query) : undefined;
          const hit = parts?.some((p) => p.hit) ?? false;
          return (
            <span
              key={key}
              class={`line${hit ? ' hit' : ''}${current === key ? ' current' : ''}`}
              data-line={key}
              data-n={first === undefined ? '' : String(first + i)}
            >
              {parts ? parts.map((p, j) => (p.hit ? <mark key={j}>{p.text}</mark> : p.text)) : line}
            </span>
          );
        })}
      </>
    );
  }
}

export interface TextLines {
  head: LineBuffer;
  /** Lines loaded from the end, the first one possibly cut. */
  tail: string[] | undefined;
}

/** Numbered head blocks, then the unterminated end of the head (a line of its own). */
export function HeadLines({ head, query, current }: { head: LineBuffer; query: string; current: string | undefined }) {
  let first = 1;
  const blocks = head.blocks.map((lines, b) => {
    const el = (
      <Block
        key={b}
        lines={lines}
        first={first}
        prefix={`h${b}:`}
        query={query}
        current={current?.startsWith(`h${b}:`) ? current : undefined}
      />
    );
    first += lines.length;
    return el;
  });
  const pending = useMemo(() => (head.pending === '' ? [] : [head.pending]), [head.pending]);
  return (
    <>
      {blocks}
      {pending.length ? (
        <Block
          lines={pending}
          first={head.count + 1}
          prefix="hp:"
          query={query}
          current={current?.startsWith('hp:') ? current : undefined}
        />
      ) : null}
    </>
  );
}

export function TailLines({ lines, query, current }: { lines: string[]; query: string; current: string | undefined }) {
  return <Block lines={lines} first={undefined} prefix="t:" query={query} current={current?.startsWith('t:') ? current : undefined} />;
}

/** Every loaded line's key, in order (the keys HeadLines and TailLines give their lines). */
function lineKeys(text: TextLines): { keys: string[]; lines: string[]; numbers: Array<number | undefined> } {
  const keys: string[] = [];
  const numbers: Array<number | undefined> = [];
  let n = 1;
  text.head.blocks.forEach((block, b) => {
    for (let i = 0; i < block.length; i++) {
      keys.push(`h${b}:${i}`);
      numbers.push(n++);
    }
  });
  if (text.head.pending !== '') {
    keys.push('hp:0');
    numbers.push(n);
  }
  for (let i = 0; i < (text.tail?.length ?? 0); i++) {
    keys.push(`t:${i}`);
    numbers.push(undefined);
  }
  return { keys, lines: [...allLines(text.head), ...(text.tail ?? [])], numbers };
}

/** The search box: finds the loaded lines holding a text, steps through them, and says where. */
export function FindBar({ text, onFound }: { text: TextLines; onFound: (query: string, current: string | undefined) => void }) {
  const id = useId();
  const [draft, setDraft] = useState('');
  const [query, setQuery] = useState('');
  const [at, setAt] = useState(0);
  const found = useMemo(() => {
    if (!query) return { keys: [] as string[], numbers: [] as Array<number | undefined> };
    const all = lineKeys(text);
    const hits = matchingLines(all.lines, query);
    return { keys: hits.map((i) => all.keys[i] as string), numbers: hits.map((i) => all.numbers[i]) };
  }, [query, text.head, text.tail]);
  const n = found.keys.length;
  const cur = n ? ((at % n) + n) % n : 0;
  useEffect(() => onFound(query, found.keys[cur]), [query, cur, found]);
  const line = found.numbers[cur];
  return (
    <form
      class="find"
      onSubmit={(e) => {
        e.preventDefault();
        if (draft === query) setAt((a) => a + 1);
        else {
          setQuery(draft);
          setAt(0);
        }
      }}
    >
      <label for={id}>Find in the loaded text</label>
      <input id={id} type="search" value={draft} onInput={(e) => setDraft((e.target as HTMLInputElement).value)} />
      <button type="submit">Find</button>
      <button type="button" onClick={() => setAt((a) => a - 1)} disabled={n < 2}>
        Previous match
      </button>
      <button type="button" onClick={() => setAt((a) => a + 1)} disabled={n < 2}>
        Next match
      </button>
      <span class="find-status small" role="status" data-testid="find-status">
        {!query
          ? ''
          : n === 0
            ? `No loaded line contains “${query}”`
            : `Match ${cur + 1} of ${n} line${n === 1 ? '' : 's'}${line === undefined ? ' (near the end)' : `, line ${line}`}`}
      </span>
    </form>
  );
}
