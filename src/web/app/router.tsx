/**
 * A tiny history router: the app's routes are real paths (the server answers index.html for them),
 * links are plain anchors whose clicks become pushState, and every navigation moves the focus to the
 * new page's heading so keyboard and screen-reader users land on the new content.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';

const EVENT = 'alp:navigate';

/**
 * Whether the page changed since it loaded: a new view then takes the focus to its heading. On the
 * first load the focus stays where the browser puts it (the top, with the skip link first).
 */
let moved = false;
export const pageMoved = () => moved;
export function notePageChange(): void {
  moved = true;
}

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: window.location.pathname, query: new URLSearchParams(window.location.search) };
}

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  moved = true;
  if (opts.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  window.scrollTo(0, 0);
  window.dispatchEvent(new Event(EVENT));
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const update = () => {
      moved = true;
      setLoc(current());
    };
    window.addEventListener('popstate', update);
    window.addEventListener(EVENT, update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener(EVENT, update);
    };
  }, []);
  return loc;
}

/** Matches "/artifacts/:id/versions/:v" against a path; the params are decoded. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/').filter(Boolean);
  const s = path.split('/').filter(Boolean);
  if (p.length !== s.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    const part = p[i] as string;
    const seg = s[i] as string;
    if (part.startsWith(':')) {
      try {
        out[part.slice(1)] = decodeURIComponent(seg);
      } catch {
        return null;
      }
    } else if (part !== seg) return null;
  }
  return out;
}

type AnchorProps = JSX.HTMLAttributes<HTMLAnchorElement> & { href: string; children?: ComponentChildren };

export function Link({ href, children, onClick, ...rest }: AnchorProps) {
  return (
    <a
      href={href}
      onClick={(e) => {
        if (onClick) (onClick as (ev: typeof e) => void)(e);
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
      {...rest}
    >
      {children}
    </a>
  );
}
