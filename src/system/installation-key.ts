/**
 * The installation key in use (issue 20 item 2): which Ed25519 key signs for this installation, and
 * under which name. The key itself is a `Signer` (signing-key.ts); this module decides where it comes
 * from and memoizes it per context, so every signature of a process is made by one key.
 *
 * - Key name = log origin = `alp.local/<installation id>`: stable for the life of the installation,
 *   unique per installation, and valid as a C2SP signed-note key name (no space, no '+').
 * - Where the key comes from is chosen by runtime/ when it opens the installation
 *   (runtime/signing.ts): a host-supplied `Signer` (a KMS), a key file named by `ALP_SIGNING_KEY`,
 *   or on the embedded profile `<data dir>/keys/installation.ed25519.pem` (generated on first use).
 *   A context without a source (the distributed profile with no key configured) fails where a
 *   signature is needed, with the error below, and nowhere else.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { NotFound } from '../core/errors.ts';
import type { ServiceContext } from './context.ts';
import { readInstallation } from './installation.ts';
import type { InstallationKeySource, SignerFactory } from './key-source.ts';
import { openFileSigner, type Signer } from './signing-key.ts';

export type { InstallationKeySource, SignerFactory };

/** The key file of an embedded installation, relative to the directory of its database. */
export const INSTALLATION_KEY_FILE = path.join('keys', 'installation.ed25519.pem');

/** The key name (and transparency-log origin) of an installation. */
export function installationKeyName(installationId: string): string {
  return `alp.local/${installationId}`;
}

/**
 * A key file: generated on first use when `create` (the embedded default), else it must exist
 * (a file named by the operator: a missing one is a configuration error, never silently replaced by
 * a fresh key each node would generate differently).
 */
export function fileKeySource(file: string, opts: { create: boolean }): InstallationKeySource {
  return {
    describe: `file:${file}`,
    open: async (keyName) => {
      if (!opts.create) await assertKeyFileExists(file);
      return openFileSigner(file, keyName);
    },
    // Only the embedded default is ALP's to replace: a named file is shared by every node.
    ...(opts.create ? { rotatable: { file } } : {}),
  };
}

async function assertKeyFileExists(file: string): Promise<void> {
  try {
    await fs.lstat(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    throw new NotFound(
      `the signing key ${file} (ALP_SIGNING_KEY) does not exist: create an Ed25519 key there (\`openssl genpkey -algorithm ed25519 -out ${file} && chmod 600 ${file}\`) or unset ALP_SIGNING_KEY`,
      { reason: 'NO_SIGNING_KEY', file },
    );
  }
}

/** A host-supplied signer (a KMS or HSM behind the `Signer` interface). */
export function hostKeySource(factory: SignerFactory): InstallationKeySource {
  return { describe: 'a signer supplied by the host', open: factory };
}

const opened = new WeakMap<InstallationKeySource, Promise<Signer>>();

/**
 * The installation's signer, opened once per key source (the first call may generate the embedded
 * key) and reconciled with the key history (ctx.keyHistory: recorded, a half-done rotation finished,
 * a retired key refused). A memoized signer is checked against the history's current key on every
 * call (one consistent read), so a process keeps no key another process rotated out: it reopens the
 * source. NOT_FOUND (`details.reason: NO_SIGNING_KEY`) when no key is configured.
 */
export async function installationSigner(ctx: ServiceContext): Promise<Signer> {
  const source = ctx.signingKey;
  if (!source) {
    throw new NotFound(
      'no signing key is configured for this installation: set ALP_SIGNING_KEY=FILE (an Ed25519 PKCS#8 PEM key, mode 0600) on every node, or supply a Signer when opening the installation',
      { reason: 'NO_SIGNING_KEY' },
    );
  }
  const memo = opened.get(source);
  const signer = await (memo ?? openMemoized(ctx, source));
  if (!memo || !ctx.keyHistory || (await ctx.keyHistory.isCurrent(ctx, signer))) return signer;
  // Rotated since it was opened (by another process, or this one): open the source again, once.
  if (opened.get(source) === memo) opened.delete(source);
  return opened.get(source) ?? openMemoized(ctx, source);
}

/** Forgets the memoized signer of ctx's source (after this process rotated the key). */
export function forgetInstallationSigner(ctx: Pick<ServiceContext, 'signingKey'>): void {
  if (ctx.signingKey) opened.delete(ctx.signingKey);
}

function openMemoized(ctx: ServiceContext, source: InstallationKeySource): Promise<Signer> {
  const signer = openSource(ctx, source);
  opened.set(source, signer);
  // A failure (a key file refused, storage unreadable) is reported to this caller, and retried by the next.
  signer.catch(() => {
    if (opened.get(source) === signer) opened.delete(source);
  });
  return signer;
}

async function openSource(ctx: ServiceContext, source: InstallationKeySource): Promise<Signer> {
  const installation = await readInstallation(ctx);
  if (!installation) throw new NotFound('no installation: run `alp init` before signing anything', { reason: 'NO_INSTALLATION' });
  const signer = await source.open(installationKeyName(installation.installation_id));
  return ctx.keyHistory ? ctx.keyHistory.adopt(ctx, source, signer) : signer;
}
