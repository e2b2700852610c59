/** A line diff between two versions of a text artifact (both fetched verified from the /v1 API). */
import { useEffect, useState } from 'preact/hooks';
import { type ArtifactWithVersions, fetchAll, type Version } from '../api.ts';
import { Digest, ErrorBox, Loading } from '../components.tsx';
import { type DiffResult, diffLines, type HunkLine, splitLines, withContext } from '../lib/diff.ts';
import { formatBytes, plural } from '../lib/format.ts';
import { navigate } from '../router.tsx';

/** Larger versions are not diffed in the browser. */
export const MAX_DIFF_BYTES = 2 * 1024 * 1024;

type Loaded = { kind: 'text'; result: DiffResult } | { kind: 'binary' } | { kind: 'too-large' };

export function DiffTab({ art, query }: { art: ArtifactWithVersions; query: URLSearchParams }) {
  const versions = [...art.versions].sort((x, y) => x.version - y.version);
  if (versions.length < 2) {
    return (
      <section aria-labelledby="diff-h">
        <h2 id="diff-h">Diff</h2>
        <p class="empty">This artifact has one version: there is nothing to compare yet.</p>
      </section>
    );
  }
  const latest = versions[versions.length - 1] as Version;
  const num = (key: string, fallback: number) => {
    const n = Number(query.get(key));
    return versions.some((v) => v.version === n) ? n : fallback;
  };
  const b = num('b', latest.version);
  const a = num('a', (versions.filter((v) => v.version < b).pop() ?? (versions[0] as Version)).version);
  const va = versions.find((v) => v.version === a) as Version;
  const vb = versions.find((v) => v.version === b) as Version;
  const go = (na: number, nb: number) => navigate(`/artifacts/${art.artifact_id}/diff?a=${na}&b=${nb}`, { replace: true });
  return (
    <section aria-labelledby="diff-h">
      <h2 id="diff-h">Diff</h2>
      <form class="diff-pick" onSubmit={(e) => e.preventDefault()}>
        <div class="field">
          <label for="diff-a">From version</label>
          <select id="diff-a" value={String(a)} onChange={(e) => go(Number((e.target as HTMLSelectElement).value), b)}>
            {versions.map((v) => (
              <option key={v.version} value={String(v.version)}>
                v{v.version} ({v.state})
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="diff-b">To version</label>
          <select id="diff-b" value={String(b)} onChange={(e) => go(a, Number((e.target as HTMLSelectElement).value))}>
            {versions.map((v) => (
              <option key={v.version} value={String(v.version)}>
                v{v.version} ({v.state})
              </option>
            ))}
          </select>
        </div>
      </form>
      <p class="muted">
        v{va.version} <Digest value={va.content_hash} /> ({formatBytes(va.size)}) → v{vb.version} <Digest value={vb.content_hash} /> (
        {formatBytes(vb.size)})
      </p>
      <DiffBody key={`${a}-${b}`} art={art} va={va} vb={vb} />
    </section>
  );
}

export function DiffBody({ art, va, vb }: { art: ArtifactWithVersions; va: Version; vb: Version }) {
  const [loaded, setLoaded] = useState<Loaded | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    if (va.size > MAX_DIFF_BYTES || vb.size > MAX_DIFF_BYTES) {
      setLoaded({ kind: 'too-large' });
      return;
    }
    const ctl = new AbortController();
    const path = (v: Version) => `/v1/artifacts/${art.artifact_id}/versions/${v.version}/content`;
    Promise.all([fetchAll(path(va), ctl.signal), fetchAll(path(vb), ctl.signal)]).then(
      ([x, y]) => {
        if (x.includes(0) || y.includes(0)) {
          setLoaded({ kind: 'binary' });
          return;
        }
        const dec = new TextDecoder('utf-8');
        setLoaded({ kind: 'text', result: diffLines(splitLines(dec.decode(x)), splitLines(dec.decode(y))) });
      },
      (e: unknown) => {
        if ((e as Error).name !== 'AbortError') setError(e);
      },
    );
    return () => ctl.abort();
  }, [va.content_hash, vb.content_hash]);
  if (error) return <ErrorBox error={error} />;
  if (!loaded) return <Loading what="Comparing" />;
  if (loaded.kind === 'too-large') {
    return <p class="empty">One of the versions is larger than {formatBytes(MAX_DIFF_BYTES)}; it is not compared in the browser.</p>;
  }
  if (loaded.kind === 'binary') {
    return (
      <p class="empty">
        Binary content:{' '}
        {va.content_hash === vb.content_hash ? 'the two versions are identical.' : 'the two versions differ (digests above).'}
      </p>
    );
  }
  const r = loaded.result;
  if (r.added === 0 && r.removed === 0) return <p class="empty">The two versions have the same text.</p>;
  const lines = withContext(r.ops, 3);
  return (
    <>
      <p class="diff-summary" aria-live="polite">
        <span class="added-count">+{plural(r.added, 'line')} added</span>,{' '}
        <span class="removed-count">−{plural(r.removed, 'line')} removed</span>
        {r.coarse ? ' (too many changes for a minimal diff: shown as a replacement)' : ''}
      </p>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take the focus so keyboard users can scroll it */}
      <section class="diff-scroll" aria-label={`Changes from v${va.version} to v${vb.version}`} tabIndex={0}>
        <table class="diff" data-testid="diff">
          <caption class="sr-only">
            Line changes from version {va.version} to version {vb.version}
          </caption>
          <thead class="sr-only">
            <tr>
              <th scope="col">Old line</th>
              <th scope="col">New line</th>
              <th scope="col">Change</th>
              <th scope="col">Text</th>
            </tr>
          </thead>
          <tbody>
            {lines.map((l, i) => (
              <DiffRow key={i} l={l} />
            ))}
          </tbody>
        </table>
      </section>
    </>
  );
}

function DiffRow({ l }: { l: HunkLine }) {
  if (l.type === 'skip') {
    return (
      <tr class="unchanged-run">
        <td colSpan={4}>⋯ {plural(l.count, 'unchanged line')}</td>
      </tr>
    );
  }
  const mark = l.type === 'add' ? '+' : l.type === 'del' ? '−' : ' ';
  const what = l.type === 'add' ? 'added' : l.type === 'del' ? 'removed' : 'unchanged';
  return (
    <tr class={`line ${l.type}`}>
      <td class="ln">{l.type === 'add' ? '' : l.a}</td>
      <td class="ln">{l.type === 'del' ? '' : l.b}</td>
      <td class="mark">
        <span aria-hidden="true">{mark}</span>
        <span class="sr-only">{what}</span>
      </td>
      <td class="code">{l.text}</td>
    </tr>
  );
}
