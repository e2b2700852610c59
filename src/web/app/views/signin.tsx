/**
 * Sign in with a token: checked with GET /v1/whoami, then kept in this tab's sessionStorage; with
 * "remember on this device" (opt-in) in localStorage too, so links opened in other tabs are signed in.
 * The form never submits to a URL (no token in a query string or a history entry).
 */
import { useState } from 'preact/hooks';
import { api, type Principal, session } from '../api.ts';
import { ErrorBox, PageTitle, Who } from '../components.tsx';

export function SignIn({ onSignedIn, current }: { onSignedIn: () => void; current?: Principal }) {
  const [token, setToken] = useState('');
  const [remember, setRemember] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const value = token.trim();
    if (!value) return;
    setBusy(true);
    setError(undefined);
    try {
      const who = await api<{ principal: Principal }>('/v1/whoami', { token: value });
      setToken('');
      session.signIn(value, who.principal, remember);
      onSignedIn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="signin">
      <PageTitle title="Sign in" />
      {current ? (
        <p>
          You are signed in as <Who p={current} />. Sign in with another token to switch.
        </p>
      ) : null}
      <form method="post" action="#" onSubmit={submit} autocomplete="off" class="panel">
        <label for="token">Access token</label>
        <input
          id="token"
          name="token"
          type="password"
          required
          autocomplete="off"
          spellcheck={false}
          aria-describedby="token-help"
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
        />
        <p id="token-help" class="help">
          A token printed by <code>npm start</code> on a new installation, or made with{' '}
          <code>alp token create --principal NAME --kind human</code>. It is sent as <code>Authorization: Bearer</code> to the{' '}
          <code>/v1</code> API and kept in this browser tab only (session storage), unless you choose to remember it.
        </p>
        <label class="inline">
          <input
            type="checkbox"
            checked={remember}
            aria-describedby="remember-help"
            onChange={(e) => setRemember((e.target as HTMLInputElement).checked)}
          />{' '}
          Remember on this device
        </label>
        <p id="remember-help" class="help">
          Keeps the token in this browser’s local storage so links opened in other tabs are signed in. Only on a device you alone use; Sign
          out forgets it everywhere on this device.
        </p>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <ErrorBox error={error} what="Sign-in refused" />
      </form>
    </section>
  );
}
