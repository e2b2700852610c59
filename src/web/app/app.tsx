/**
 * The shell: sign-in gate, header with navigation and the signed-in principal, and the routes.
 * Every view reads the /v1 API with the session's token; nothing is fetched from anywhere else.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { type Principal, session } from './api.ts';
import { PageTitle, Who } from './components.tsx';
import { Link, match, navigate, notePageChange, useLocation } from './router.tsx';
import { ArtifactPage, type ArtifactTab } from './views/artifact.tsx';
import { ArtifactsList } from './views/artifacts.tsx';
import { Operations } from './views/operations.tsx';
import { OutputPage, RunPage } from './views/run.tsx';
import { SignIn } from './views/signin.tsx';

const TABS: ArtifactTab[] = ['history', 'approvals', 'executions', 'provenance', 'diff'];

export function App() {
  const loc = useLocation();
  const [principal, setPrincipal] = useState<Principal | null>(session.principal());
  useEffect(
    () =>
      session.subscribe(() => {
        notePageChange();
        setPrincipal(session.principal());
      }),
    [],
  );

  if (!principal) {
    return (
      <Shell principal={null} path={loc.path}>
        <SignIn onSignedIn={() => loc.path === '/signin' && navigate('/', { replace: true })} />
      </Shell>
    );
  }
  return (
    <Shell principal={principal} path={loc.path}>
      {route(loc.path, loc.query, principal)}
    </Shell>
  );
}

function route(path: string, query: URLSearchParams, principal: Principal) {
  if (path === '/' || path === '/artifacts') return <ArtifactsList query={query} />;
  if (path === '/signin') return <SignIn onSignedIn={() => navigate('/', { replace: true })} current={principal} />;
  if (path === '/operations') return <Operations />;
  let m = match('/artifacts/:id', path);
  if (m) return <ArtifactPage id={m.id as string} tab="versions" query={query} principal={principal} />;
  m = match('/artifacts/:id/versions/:v', path);
  if (m) return <ArtifactPage id={m.id as string} tab="version" version={Number(m.v)} query={query} principal={principal} />;
  m = match('/artifacts/:id/:tab', path);
  if (m && TABS.includes(m.tab as ArtifactTab)) {
    return <ArtifactPage id={m.id as string} tab={m.tab as ArtifactTab} query={query} principal={principal} />;
  }
  m = match('/runs/:run', path);
  if (m) return <RunPage run={m.run as string} />;
  m = match('/runs/:run/:output', path);
  if (m) return <OutputPage run={m.run as string} output={m.output as string} />;
  return <NotFound path={path} />;
}

function NotFound({ path }: { path: string }) {
  return (
    <section>
      <PageTitle title="Page not found" />
      <p>
        There is no page at <code>{path}</code>. <Link href="/">Back to the artifacts</Link>.
      </p>
    </section>
  );
}

function Shell({ principal, path, children }: { principal: Principal | null; path: string; children: ComponentChildren }) {
  const here = (prefix: string) =>
    (prefix === '/' ? path === '/' || path.startsWith('/artifacts') || path.startsWith('/runs') : path.startsWith(prefix))
      ? 'page'
      : undefined;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <div class="top-inner">
          <Link href="/" class="brand" aria-label="ALP home">
            <span aria-hidden="true" class="brand-mark">
              ▲
            </span>{' '}
            ALP
          </Link>
          {principal ? (
            <nav aria-label="Main">
              <ul class="nav-list">
                <li>
                  <Link href="/" aria-current={here('/')}>
                    Artifacts
                  </Link>
                </li>
                <li>
                  <Link href="/operations" aria-current={here('/operations')}>
                    Operations
                  </Link>
                </li>
              </ul>
            </nav>
          ) : null}
          {principal ? (
            <div class="signed-in">
              <span class="sr-only">Signed in as </span>
              <Who p={principal} />
              <button
                type="button"
                class="link-button"
                onClick={() => {
                  session.signOut();
                  navigate('/signin');
                }}
              >
                Sign out
              </button>
            </div>
          ) : null}
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </>
  );
}
