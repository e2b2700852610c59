/**
 * A viewer for verified bytes (version content, execution outputs) that loads them incrementally:
 * one Range request of 256 KiB at a time, from the start ("Load more") or the end ("Load the end"),
 * so a 50 MiB log opens as fast as a small one and never lands in the page whole. Text is decoded as
 * UTF-8 across chunk boundaries; NUL bytes mark content as binary (shown as a hex preview). When the
 * whole content is loaded (small files), its sha256 is recomputed in the browser and compared with
 * the digest the API reported.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { fetchRange } from '../api.ts';
import { ErrorBox } from '../components.tsx';
import { formatBytes, formatCount } from '../lib/format.ts';

export const PAGE_BYTES = 256 * 1024;
/** Up to this size the bytes are kept to re-hash them in the browser. */
const VERIFY_MAX = 4 * 1024 * 1024;

interface Segment {
  start: number;
  end: number;
  parts: string[];
}

interface ViewerState {
  head: Segment;
  tail: Segment | undefined;
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
}

// Over 80 lines for a reason: one component's hooks (the loaded ranges, their loaders and the keyboard
// handling share one state) cannot be split across functions without lifting that state out.
export function ByteViewer({ path, size, label, digest, json = false, tall = false }: ByteViewerProps) {
  const [state, setState] = useState<ViewerState>({
    head: { start: 0, end: 0, parts: [] },
    tail: undefined,
    total: size,
    binary: undefined,
    kept: [],
  });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [wrap, setWrap] = useState(true);
  const [verified, setVerified] = useState<'match' | 'mismatch' | undefined>(undefined);
  const decoder = useRef(new TextDecoder('utf-8'));
  const box = useRef<HTMLElement>(null);
  const [scrollToEnd, setScrollToEnd] = useState(false);
  const ctl = useRef<AbortController | undefined>(undefined);

  const load = async (which: 'head' | 'tail') => {
    setBusy(true);
    setError(undefined);
    ctl.current = new AbortController();
    try {
      const s = state;
      const limit = s.tail ? s.tail.start : s.total;
      const start = which === 'head' ? s.head.end : Math.max(s.head.end, s.total - PAGE_BYTES);
      const end = which === 'head' ? Math.min(limit, start + PAGE_BYTES) : s.total;
      if (end <= start) return;
      const chunk = await fetchRange(path, start, end, ctl.current.signal);
      const total = chunk.total;
      if (which === 'head' && start === 0 && chunk.bytes.subarray(0, 8192).includes(0)) {
        setState({ ...s, head: { start: 0, end: chunk.end, parts: [] }, binary: chunk.bytes.subarray(0, 1024), total });
        return;
      }
      if (which === 'head') {
        const last = chunk.end >= (s.tail ? s.tail.start : total);
        const text = decoder.current.decode(chunk.bytes, { stream: !last });
        const kept = total <= VERIFY_MAX ? [...s.kept, chunk.bytes] : [];
        setState({ ...s, total, kept, head: { start: 0, end: chunk.end, parts: [...s.head.parts, text] } });
      } else {
        // The tail starts mid-file: its first line may be cut (and its first character, if multi-byte).
        const text = new TextDecoder('utf-8').decode(chunk.bytes);
        setState({ ...s, total, tail: { start: chunk.start, end: chunk.end, parts: [text] } });
        setScrollToEnd(true);
      }
    } catch (e) {
      if ((e as Error).name !== 'AbortError') setError(e);
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    void load('head');
    return () => ctl.current?.abort();
  }, [path]);

  useEffect(() => {
    if (!scrollToEnd || !box.current) return;
    box.current.scrollTop = box.current.scrollHeight;
    setScrollToEnd(false);
  }, [scrollToEnd, state.tail]);

  const complete = !state.binary && state.head.end >= (state.tail ? state.tail.start : state.total) && !busy && !error;
  const whole = complete && !state.tail && state.total <= VERIFY_MAX && state.kept.length > 0;
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

  if (state.total === 0 && !busy) {
    return <p class="empty">{label} is empty (0 bytes).</p>;
  }
  const shown = state.head.end + (state.tail ? state.tail.end - state.tail.start : 0);
  let headText = state.head.parts;
  if (json && complete && !state.tail) {
    try {
      headText = [JSON.stringify(JSON.parse(state.head.parts.join('')), null, 2)];
    } catch {
      // not JSON: shown as it is
    }
  }
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
          <pre>
            {headText.map((t, i) => (
              <span key={i}>{t}</span>
            ))}
          </pre>
        )}
        {gap > 0 && state.tail ? (
          <p class="gap">
            … {formatBytes(gap)} ({formatCount(gap)} bytes) not loaded …
          </p>
        ) : null}
        {state.tail ? (
          <pre class="tail">
            <span>{state.tail.parts.join('')}</span>
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
