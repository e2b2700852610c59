/**
 * A viewer for verified bytes (version content, execution outputs) that loads them incrementally:
 * one Range request of 256 KiB at a time, from the start ("Load more") or the end ("Load the end"),
 * so a 50 MiB log opens as fast as a small one and never lands in the page whole. Text is decoded as
 * UTF-8 across chunk boundaries into numbered lines (searchable within what is loaded); NUL bytes
 * mark content as binary (shown as a hex preview). When the whole content is loaded (small files), its
 * sha256 is recomputed in the browser and compared with the digest the API reported.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { fetchRange } from '../api.ts';
import { ErrorBox } from '../components.tsx';
import { formatBytes, formatCount } from '../lib/format.ts';
import { appendText, emptyLines, type LineBuffer, linesOf } from '../lib/lines.ts';
import { FindBar, HeadLines, TailLines } from './viewer-lines.tsx';

export const PAGE_BYTES = 256 * 1024;
/** Up to this size the bytes are kept to re-hash them in the browser. */
const VERIFY_MAX = 4 * 1024 * 1024;

interface ViewerState {
  /** Bytes [0, end) decoded into numbered lines. */
  head: { end: number; lines: LineBuffer };
  /** The last bytes, loaded before the middle: kept raw to join the head once the middle is loaded. */
  tail: { start: number; end: number; bytes: Uint8Array; lines: string[] } | undefined;
  total: number;
  binary: Uint8Array | undefined;
  kept: Uint8Array[];
}

export interface ByteViewerProps {
  path: string;
  size: number;
  label: string;
  digest?: string | undefined;
  /** Pretty-print JSON when it is loaded whole. */
  json?: boolean;
  tall?: boolean;
  /** Open at the end (a failed run's stderr): load the last range first and scroll to the bottom. */
  atEnd?: boolean;
}

const initial = (size: number): ViewerState => ({
  head: { end: 0, lines: emptyLines() },
  tail: undefined,
  total: size,
  binary: undefined,
  kept: [],
});

function tailLines(bytes: Uint8Array): string[] {
  // The tail starts mid-file: its first line may be cut (and its first character, if multi-byte).
  const lines = new TextDecoder('utf-8').decode(bytes).split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** The next state after a range of the head arrived; joins the tail when the head reaches it. */
function withHead(s: ViewerState, decoder: TextDecoder, bytes: Uint8Array, end: number, total: number): ViewerState {
  const keep = (more: Uint8Array[]) => (total <= VERIFY_MAX ? [...s.kept, ...more] : []);
  if (s.tail && end >= s.tail.start) {
    const text = decoder.decode(bytes, { stream: true }) + decoder.decode(s.tail.bytes);
    return {
      ...s,
      total,
      kept: keep([bytes, s.tail.bytes]),
      tail: undefined,
      head: { end: s.tail.end, lines: appendText(s.head.lines, text) },
    };
  }
  const text = decoder.decode(bytes, { stream: end < total });
  return { ...s, total, kept: keep([bytes]), head: { end, lines: appendText(s.head.lines, text) } };
}

/** Loads ranges into the viewer's state: the next range of the head, or the last range (the tail). */
function useRanges(path: string, size: number, atEnd: boolean) {
  const [state, setState] = useState<ViewerState>(() => initial(size));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [scrollToEnd, setScrollToEnd] = useState(false);
  const decoder = useRef(new TextDecoder('utf-8'));
  const ctl = useRef<AbortController | undefined>(undefined);
  const current = useRef(state);
  current.current = state;

  const load = async (which: 'head' | 'tail') => {
    setBusy(true);
    setError(undefined);
    ctl.current = new AbortController();
    try {
      const s = current.current;
      const tailStart = Math.max(s.head.end, s.total - PAGE_BYTES);
      if (which === 'tail' && tailStart > s.head.end) {
        const chunk = await fetchRange(path, tailStart, s.total, ctl.current.signal);
        setState({
          ...s,
          total: chunk.total,
          tail: { start: chunk.start, end: chunk.end, bytes: chunk.bytes, lines: tailLines(chunk.bytes) },
        });
        setScrollToEnd(true);
        return;
      }
      const start = s.head.end;
      const end = Math.min(s.tail ? s.tail.start : s.total, start + PAGE_BYTES);
      if (end <= start) return;
      const chunk = await fetchRange(path, start, end, ctl.current.signal);
      if (start === 0 && chunk.bytes.subarray(0, 8192).includes(0)) {
        setState({ ...s, head: { end: chunk.end, lines: emptyLines() }, binary: chunk.bytes.subarray(0, 1024), total: chunk.total });
        return;
      }
      setState(withHead(s, decoder.current, chunk.bytes, chunk.end, chunk.total));
      if (which === 'tail' || (atEnd && start === 0)) setScrollToEnd(true);
    } catch (e) {
      if ((e as Error).name !== 'AbortError') setError(e);
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    void load(atEnd && size > PAGE_BYTES ? 'tail' : 'head');
    return () => ctl.current?.abort();
  }, [path]);
  return { state, busy, error, load, scrollToEnd, scrolled: () => setScrollToEnd(false) };
}

/** Re-hashes content loaded whole (small files) and compares it with the digest the API reported. */
function useVerified(state: ViewerState, whole: boolean, digest: string | undefined) {
  const [verified, setVerified] = useState<'match' | 'mismatch' | undefined>(undefined);
  useEffect(() => {
    if (!whole || !digest || !crypto.subtle) return;
    const all = new Uint8Array(state.total);
    let off = 0;
    for (const k of state.kept) {
      all.set(k, off);
      off += k.length;
    }
    void crypto.subtle.digest('SHA-256', all).then((h) => {
      const hex = [...new Uint8Array(h)].map((b) => b.toString(16).padStart(2, '0')).join('');
      setVerified(`sha256:${hex}` === digest ? 'match' : 'mismatch');
    });
  }, [whole, digest]);
  return verified;
}

// Over 80 lines for a reason: the bar, the scrolling region, its lines and the loaders share one
// state (the loaded ranges) and one scroll position.
export function ByteViewer({ path, size, label, digest, json = false, tall = false, atEnd = false }: ByteViewerProps) {
  const { state, busy, error, load, scrollToEnd, scrolled } = useRanges(path, size, atEnd);
  const [wrap, setWrap] = useState(true);
  const [find, setFind] = useState<{ query: string; current: string | undefined }>({ query: '', current: undefined });
  const box = useRef<HTMLElement>(null);

  useEffect(() => {
    if (!scrollToEnd || !box.current) return;
    box.current.scrollTop = box.current.scrollHeight;
    scrolled();
  }, [scrollToEnd, state]);
  useEffect(() => {
    const el = find.current ? box.current?.querySelector<HTMLElement>(`[data-line="${find.current}"]`) : null;
    if (el && box.current) box.current.scrollTop = Math.max(0, el.offsetTop - box.current.clientHeight / 3);
  }, [find]);

  const complete = !state.binary && !state.tail && state.head.end >= state.total && !busy && !error;
  const loadedBytes = state.kept.reduce((a, k) => a + k.length, 0);
  const verified = useVerified(state, complete && state.total <= VERIFY_MAX && loadedBytes === state.total && state.total > 0, digest);
  const pretty = useMemo(() => {
    if (!json || !complete) return undefined;
    try {
      return linesOf(JSON.stringify(JSON.parse([...state.head.lines.blocks.flat(), state.head.lines.pending].join('\n')), null, 2));
    } catch {
      return undefined; // not JSON: shown as it is
    }
  }, [json, complete, state.head.lines]);

  if (state.total === 0 && !busy) {
    return <p class="empty">{label} is empty (0 bytes).</p>;
  }
  const shown = state.head.end + (state.tail ? state.tail.end - state.tail.start : 0);
  const head = pretty ?? state.head.lines;
  const gap = (state.tail ? state.tail.start : state.total) - state.head.end;
  return (
    <div class="viewer-wrap">
      <div class="viewer-bar">
        <p class="viewer-status" aria-live="polite">
          {busy ? 'Loading… ' : ''}
          Showing {formatCount(shown)} of {formatCount(state.total)} bytes ({formatBytes(state.total)})
          {state.total > 0 ? ` — ${Math.min(100, Math.round((shown / state.total) * 1000) / 10)}%` : ''}
        </p>
        {verified === 'match' ? <p class="ok small">✓ sha256 recomputed in this browser matches the digest</p> : null}
        {verified === 'mismatch' ? (
          <p class="bad small" role="alert">
            ✗ the bytes received do not match the digest
          </p>
        ) : null}
        {!state.binary ? (
          <label class="inline">
            <input type="checkbox" checked={wrap} onChange={(e) => setWrap((e.target as HTMLInputElement).checked)} /> Wrap long lines
          </label>
        ) : null}
      </div>
      {!state.binary ? (
        <FindBar text={{ head, tail: state.tail?.lines }} onFound={(query, current) => setFind({ query, current })} />
      ) : null}
      <section
        ref={box}
        class={`viewer${wrap ? ' wrapped' : ''}${tall ? ' tall' : ''}`}
        aria-label={`${label} content`}
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take the focus so keyboard users can scroll it
        tabIndex={0}
        data-testid="viewer"
      >
        {state.binary ? (
          <pre class="hex">{hexPreview(state.binary)}</pre>
        ) : (
          <pre class="numbered">
            <HeadLines head={head} query={find.query} current={find.current} />
          </pre>
        )}
        {gap > 0 && state.tail ? (
          <p class="gap">
            … {formatBytes(gap)} ({formatCount(gap)} bytes) not loaded; the lines after it are numbered once it is …
          </p>
        ) : null}
        {state.tail ? (
          <pre class="tail numbered">
            <TailLines lines={state.tail.lines} query={find.query} current={find.current} />
          </pre>
        ) : null}
      </section>
      <ErrorBox error={error} what={`Loading ${label}`} />
      {!state.binary && gap > 0 ? (
        <div class="viewer-actions">
          <button type="button" onClick={() => void load('head')} disabled={busy}>
            Load the next {formatBytes(Math.min(PAGE_BYTES, gap))}
          </button>
          {!state.tail && gap > PAGE_BYTES ? (
            <button type="button" onClick={() => void load('tail')} disabled={busy}>
              Load the last {formatBytes(PAGE_BYTES)}
            </button>
          ) : null}
        </div>
      ) : null}
      {state.binary ? <p class="muted small">Binary content: a hex preview of the first {formatBytes(state.binary.length)}.</p> : null}
    </div>
  );
}

function hexPreview(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = bytes.subarray(i, i + 16);
    const hex = [...row].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = [...row].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join('\n');
}
