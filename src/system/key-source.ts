/**
 * Where the installation's signing key comes from, as the ServiceContext carries it (context.ts) and
 * installation-key.ts resolves it: a factory for the key name, and a description for messages.
 */
import type { Signer } from './signing-key.ts';

/** Gives the signer for the installation's key name (a KMS-backed host implements this). */
export type SignerFactory = (keyName: string) => Promise<Signer>;

/** Where the installation key comes from: `open` gives the signer, `describe` says where it is (for messages). */
export interface InstallationKeySource {
  open: SignerFactory;
  describe: string;
  /**
   * Set on the embedded default only (`<data dir>/keys/installation.ed25519.pem`): the key file
   * `alp keys rotate` replaces (audit/key-rotation.ts). A named file or a host signer is rotated at
   * its source instead.
   */
  rotatable?: { file: string };
}
