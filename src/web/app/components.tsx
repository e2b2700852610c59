/** Shared pieces: data loading, problem display, state badges, digests, principals, page headings. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type Principal, type Problem } from './api.ts';
import { formatTime, shortDigest } from './lib/format.ts';
import { pageMoved } from './router.tsx';

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload(): void;
}

/** GETs a /v1 path (null: nothing yet) and re-fetches when it changes or on reload(). */
export function useApi<T>(path: string | null): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: path !== null,
  });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (path === null) return;
    const ctl = new AbortController();
    setState((s) => ({ data: s.data, error: undefined, loading: true }));
    api<T>(path, { signal: ctl.signal }).then(
      (data) => setState({ data, error: undefined, loading: false }),
      (error: unknown) => {
        if ((error as Error).name !== 'AbortError') setState({ data: undefined, error, loading: false });
      },
    );
    return () => ctl.abort();
  }, [path, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

export function problemOf(error: unknown): Problem {
  if (error instanceof ApiError) return error.problem;
  return { status: 0, title: 'Something went wrong in the page', code: 'CLIENT', detail: (error as Error)?.message ?? String(error) };
}

/** An API error as its problem+json title and code (and detail, request id). */
export function ErrorBox({ error, what }: { error: unknown; what?: string }) {
  if (!error) return null;
  const p = problemOf(error);
  return (
    <div class="problem" role="alert">
      <p class="problem-title">
        {what ? <span>{what}: </span> : null}
        <strong>{p.title}</strong> <code class="problem-code">{p.code}</code>
        {p.status ? <span class="muted"> (HTTP {p.status})</span> : null}
      </p>
      {p.detail ? <p class="problem-detail">{p.detail}</p> : null}
      {p.request_id ? <p class="muted small">request id {p.request_id}</p> : null}
    </div>
  );
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="loading" role="status">
      {what}…
    </p>
  );
}

export function StateBadge({ state }: { state: string }) {
  return <span class={`badge state-${state.toLowerCase()}`}>{state}</span>;
}

/**
 * A digest: short by default (the full value in the title), or in full (wrapping anywhere); with
 * `copy`, a button puts the full value on the clipboard.
 */
export function Digest({ value, full = false, copy = false }: { value: string | undefined | null; full?: boolean; copy?: boolean }) {
  if (!value) return <span class="muted">—</span>;
  const shown = full ? (
    <code class="digest digest-full">{value}</code>
  ) : (
    <code class="digest" title={value}>
      {shortDigest(value)}
    </code>
  );
  if (!copy) return shown;
  return (
    <span class="digest-with-copy">
      {shown} <CopyButton value={value} />
    </span>
  );
}

async function writeClipboard(text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    return;
  } catch {
    // No clipboard API here (or no permission): the older selection route.
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.append(area);
  area.select();
  const ok = document.execCommand('copy');
  area.remove();
  if (!ok) throw new Error('the browser refused to copy');
}

/** A "Copy" button for one value; says "Copied" (to screen readers too) once it is on the clipboard. */
export function CopyButton({ value, what = 'digest' }: { value: string; what?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  const copy = async () => {
    try {
      await writeClipboard(value);
      setState('copied');
    } catch {
      setState('failed');
    }
    clearTimeout(timer.current);
    timer.current = setTimeout(() => setState('idle'), 4000);
  };
  return (
    <span class="copy-wrap">
      <button type="button" class="copy" aria-label={`Copy ${what} ${value}`} title={`Copy ${value}`} onClick={() => void copy()}>
        {state === 'copied' ? 'Copied' : 'Copy'}
      </button>
      <span class="sr-only" role="status">
        {state === 'copied' ? `${what} copied` : state === 'failed' ? `could not copy the ${what}` : ''}
      </span>
    </span>
  );
}

export function Who({ p }: { p: Principal | undefined | null }) {
  if (!p) return <span class="muted">—</span>;
  return (
    <span class="who-is">
      {p.id} <span class={`kind kind-${p.kind}`}>{p.kind}</span>
    </span>
  );
}

export function Time({ iso }: { iso: string | undefined | null }) {
  if (!iso) return <span class="muted">—</span>;
  return <time dateTime={iso}>{formatTime(iso)}</time>;
}

/** The page's h1: sets the document title and takes the focus when the page opens. */
export function PageTitle({ title, children }: { title: string; children?: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · ALP`;
  }, [title]);
  useEffect(() => {
    if (pageMoved()) ref.current?.focus({ preventScroll: true });
  }, []);
  return (
    <h1 ref={ref} tabIndex={-1}>
      {children ?? title}
    </h1>
  );
}

/** Label/value pairs; a third `true` gives the pair the whole row (long values: digests, keys). */
export type Fact = [string, ComponentChildren] | [string, ComponentChildren, boolean];

export function Facts({ items }: { items: Fact[] }) {
  return (
    <dl class="facts">
      {items.map(([k, v, wide]) => (
        <div class={wide ? 'fact wide' : 'fact'} key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}
