/**
 * Which key an opened installation signs with (issue 20 item 2), chosen once from how it was opened:
 *
 * 1. a `Signer` factory the host passes to openInstallation (`OpenOptions.signer`: a KMS or HSM);
 * 2. else `ALP_SIGNING_KEY=FILE` (or `file:FILE`): an Ed25519 PKCS#8 PEM key the operator made, mode
 *    0600; it must exist (every node of a distributed installation must sign with the same key, so
 *    none may generate its own);
 * 3. else, on the embedded profile (SQLite), `<directory of alp.db>/keys/installation.ed25519.pem`,
 *    generated on first use (0600 in a 0700 directory; system/signing-key.ts);
 * 4. else (DynamoDB with no key configured) none: whatever must sign fails with NO_SIGNING_KEY.
 */
import path from 'node:path';
import type { StorageConfig } from '../core/config.ts';
import { UsageError } from '../core/errors.ts';
import {
  fileKeySource,
  hostKeySource,
  INSTALLATION_KEY_FILE,
  type InstallationKeySource,
  type SignerFactory,
} from '../system/installation-key.ts';

export function installationKeySource(
  config: StorageConfig,
  env: NodeJS.ProcessEnv = process.env,
  hostSigner?: SignerFactory,
): InstallationKeySource | undefined {
  if (hostSigner) return hostKeySource(hostSigner);
  const named = env.ALP_SIGNING_KEY;
  if (named !== undefined && named !== '') return fileKeySource(keyFilePath(named), { create: false });
  if (config.metadata.engine === 'sqlite')
    return fileKeySource(path.join(path.dirname(path.resolve(config.metadata.path)), INSTALLATION_KEY_FILE), { create: true });
  return undefined;
}

function keyFilePath(value: string): string {
  const file = value.startsWith('file:') ? value.slice('file:'.length) : value;
  if (file === '' || /^[a-z][a-z0-9+.-]*:\/\//i.test(file))
    throw new UsageError(`ALP_SIGNING_KEY names a key file (FILE or file:FILE), not ${JSON.stringify(value)}`);
  return path.resolve(file);
}
