/**
 * Labels as chips that filter the listing by that label, and the labels of listed versions (a
 * version in a listing does not carry its artifact's labels: they are read from the artifact, once
 * per artifact and page load — labels are set when an artifact is created and never change).
 */
import { useEffect, useState } from 'preact/hooks';
import { type Artifact, api, enc } from '../api.ts';
import { Link } from '../router.tsx';

export function labelHref(key: string, value: string): string {
  return `/artifacts?label=${enc(`${key}=${value}`)}`;
}

export function Labels({ labels }: { labels: Record<string, string> | undefined }) {
  const entries = Object.entries(labels ?? {});
  if (entries.length === 0) return <span class="muted">none</span>;
  return (
    <ul class="labels">
      {entries.map(([k, v]) => (
        <li key={k}>
          <Link href={labelHref(k, v)} class="chip" title={`Search the artifacts labelled ${k}=${v}`}>
            <span class="sr-only">filter by label </span>
            {k}={v}
          </Link>
        </li>
      ))}
    </ul>
  );
}

const known = new Map<string, Promise<Record<string, string>>>();
const PARALLEL = 6;

function labelsOf(id: string): Promise<Record<string, string>> {
  let p = known.get(id);
  if (!p) {
    p = api<Artifact>(`/v1/artifacts/${enc(id)}`).then((a) => a.labels ?? {});
    p.catch(() => known.delete(id));
    known.set(id, p);
  }
  return p;
}

/** The labels of these artifacts, filled in as they arrive (at most a few requests at a time). */
export function useLabels(ids: readonly string[]): Map<string, Record<string, string>> {
  const [labels, setLabels] = useState<Map<string, Record<string, string>>>(new Map());
  const wanted = [...new Set(ids)];
  const key = wanted.join(',');
  useEffect(() => {
    let live = true;
    const queue = [...wanted];
    const found = new Map<string, Record<string, string>>();
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        try {
          found.set(id, await labelsOf(id));
        } catch {
          // An artifact that cannot be read shows no labels; the listing itself still stands.
        }
        if (live && (queue.length === 0 || found.size % 10 === 0)) setLabels(new Map(found));
      }
    };
    void Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, worker)).then(() => {
      if (live) setLabels(new Map(found));
    });
    return () => {
      live = false;
    };
  }, [key]);
  return labels;
}
