/**
 * What the end-to-end test modules share: one `alp start` and one browser for the whole run (seeding
 * the 50 MiB log once), set up by ui.test.ts and read through getters (they exist once `before` ran).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import type { AlpProcess } from './harness.ts';
import type { Seeded } from './seed.ts';

export interface E2eEnv {
  alp(): AlpProcess;
  data(): Seeded;
  /** The installation's data directory. */
  dataDir(): string;
  newPage(width?: number): Promise<{ context: BrowserContext; page: Page }>;
  signIn(page: Page, token: string, path?: string): Promise<void>;
  /** Screenshot, axe (no serious violation) and no horizontal overflow. */
  check(page: Page, name: string, width: number, report: string[]): Promise<void>;
}

/** A locator's text (its DOM textContent). */
export const text = async (l: Locator) => (await l.textContent()) ?? '';

export const sha256 = (b: Uint8Array | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** The file of a stored object: the one under the data directory whose path ends with its key. */
export function storedFile(dataDir: string, key: string): string {
  const want = key.split('/').join(path.sep);
  const walk = (dir: string): string | undefined => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        const found = walk(p);
        if (found) return found;
      } else if (p.endsWith(`${path.sep}${want}`)) return p;
    }
    return undefined;
  };
  const found = walk(dataDir);
  if (!found) throw new Error(`no stored file for ${key} under ${dataDir}`);
  return found;
}
