/**
 * Opens an installation's services from storage URLs: the two engines, the clock, and the hooks other
 * services plug into the audit transaction. Every entry point (CLI, HTTP server) opens through here,
 * so they all write the same way.
 */

import fs from 'node:fs';
import path from 'node:path';
import { openContentStore } from '../content/open.ts';
import type { Clock } from '../core/clock.ts';
import { describeContent, describeMetadata, type StorageConfig } from '../core/config.ts';
import { NotFound, UsageError } from '../core/errors.ts';
import { openItemStore } from '../store/open.ts';
import { type Tightened, tightenInstallation } from '../store/sqlite/file-modes.ts';
import { readLayout } from '../system/installation.ts';
import type { SignerFactory } from '../system/installation-key.ts';
import { defaultLayout, type Layout } from '../system/layout.ts';
import { checkSchema } from '../system/schema.ts';
import { createContext, type ServiceContext } from './context.ts';
import { installationKeySource } from './signing.ts';
import { attachAuditSinks } from './sinks.ts';

export interface OpenInstallation {
  ctx: ServiceContext;
  close(): Promise<void>;
}

/**
 * Why a store named by the user's own paths cannot be opened (a file where a directory must be, a
 * name too long, no permission, a file that is not a database): a usage error that says so, not an
 * internal failure. Anything else (a disk failing, a network error) passes through.
 */
const UNOPENABLE: Record<string, string> = {
  EEXIST: 'a file is in the way of a directory',
  ENOTDIR: 'a path component is not a directory',
  EISDIR: 'a directory is where a file must be',
  ENAMETOOLONG: 'a path name is too long',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ELOOP: 'too many symbolic links',
  SQLITE_NOTADB: 'the file is not a SQLite database',
  SQLITE_CANTOPEN: 'the database file cannot be opened',
  SQLITE_READONLY: 'the database is read-only',
};

function unopenable(what: string, e: unknown): unknown {
  const code = (e as { code?: unknown } | undefined)?.code;
  const why = typeof code === 'string' ? UNOPENABLE[code] : undefined;
  return why ? new UsageError(`cannot open ${what}: ${why} (${code})`, { errno: code }) : e;
}

export interface OpenOptions {
  /**
   * When the installation's metadata store does not exist (no SQLite file, no DynamoDB table):
   * `create` (the default; `alp init`, `start`, `restore`, the library) opens it anyway so that the
   * startup sequence creates it; `refuse` (every other CLI command) fails with NOT_FOUND "no
   * installation at …" and creates nothing.
   */
  ifMissing?: 'create' | 'refuse';
  /**
   * The installation key, supplied by the host (a KMS or HSM behind the Signer interface), given the
   * key name `alp.local/<installation id>`. Default: ALP_SIGNING_KEY, else the embedded key file
   * (runtime/signing.ts).
   */
  signer?: SignerFactory;
  /** Where the services say what they repaired on their own (ServiceContext.warn); default: nowhere. */
  warn?: (message: string) => void;
}

export async function openInstallation(config: StorageConfig, clock: Clock, opts: OpenOptions = {}): Promise<OpenInstallation> {
  const refuse = opts.ifMissing === 'refuse';
  // Chosen (and ALP_SIGNING_KEY checked) before anything is opened; the key itself is opened on first use.
  const signingKey = installationKeySource(config, process.env, opts.signer);
  // Checked before opening: opening a SQLite file that is not there creates it.
  if (refuse && sqliteFileMissing(config)) throw noInstallation(config);
  const items = await openItemStore(config.metadata).catch((e: unknown) => {
    throw unopenable(`the metadata store ${describeMetadata(config.metadata)}`, e);
  });
  let content: Awaited<ReturnType<typeof openContentStore>>;
  try {
    content = await openContentStore(config.content);
  } catch (e) {
    await items.close();
    throw unopenable(`the content store ${describeContent(config.content)}`, e);
  }
  // A layout newer than this code refuses; an older one migrates (docs/design.md, "Schema versions").
  // A store that cannot be read yet (a DynamoDB table `init` or `restore` is about to create) is
  // checked by startInstallation once prepared; every other failure (a verdict, a migration) stops us.
  // Refusing, a store that cannot be read is an error: a DynamoDB table that does not exist is none.
  await checkSchema(items, { unreadable: refuse ? 'throw' : 'skip' }).catch(async (e: unknown) => {
    await Promise.all([content.close(), items.close()]);
    throw refuse && tableMissing(e) ? noInstallation(config) : e;
  });
  const layout = await layoutToOpen(items, config);
  const ctx = createContext({
    items,
    content,
    clock,
    layout,
    ...(signingKey ? { signingKey } : {}),
    ...(opts.warn ? { warn: opts.warn } : {}),
  });
  await attachAuditSinks(ctx);
  return {
    ctx,
    close: async () => {
      await content.close();
      await items.close();
    },
  };
}

function sqliteFileMissing(config: StorageConfig): boolean {
  if (config.metadata.engine !== 'sqlite') return false;
  try {
    fs.statSync(config.metadata.path);
    return false;
  } catch (e) {
    // Only a path that is not there: a file in the way or a name too long stay the usage errors of opening.
    return (e as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/** The DynamoDB engine reports a missing table as an error caused by ResourceNotFoundException. */
function tableMissing(e: unknown): boolean {
  return (e as { cause?: { name?: unknown } } | undefined)?.cause?.name === 'ResourceNotFoundException';
}

/** NOT_FOUND naming where the installation was looked for: the --data directory, else the metadata URL. */
function noInstallation(config: StorageConfig): NotFound {
  const { metadata, content } = config;
  const dataDir =
    metadata.engine === 'sqlite' && content.engine === 'fs' && path.dirname(path.resolve(content.root)) === path.dirname(metadata.path)
      ? path.dirname(metadata.path)
      : undefined;
  const where = dataDir ?? describeMetadata(metadata);
  return new NotFound(
    `no installation at ${where}: run \`alp init\` (or \`alp start\`) to create one, or name an existing one with --data, --metadata or ALP_DATA`,
    { reason: 'NO_INSTALLATION', metadata: describeMetadata(metadata), content: describeContent(content) },
  );
}

/**
 * The shard layout of an existing installation (from its record), else the default a new one on this
 * metadata engine gets (`ALP_LAYOUT` may change it): `init` records it. A store that cannot be read yet
 * (a DynamoDB table not created) opens with the default too.
 */
async function layoutToOpen(items: ServiceContext['items'], config: StorageConfig): Promise<Layout> {
  const stored = await readLayout(items).catch(() => undefined);
  return stored ?? defaultLayout(config.metadata.engine);
}

/**
 * Makes an embedded installation private again when a looser umask left it readable by other local
 * users (alp start, serve and init call this and warn about each path it changed). The database's
 * directory is tightened when it is the data directory (it also holds the content root), never a
 * shared directory a `sqlite:PATH` happens to sit in.
 */
export function tightenEmbeddedModes(config: StorageConfig): Tightened[] {
  if (config.metadata.engine !== 'sqlite') return [];
  const dbDir = path.dirname(path.resolve(config.metadata.path));
  const isDataDir = config.content.engine === 'fs' && path.dirname(path.resolve(config.content.root)) === dbDir;
  return tightenInstallation(config.metadata.path, isDataDir ? [dbDir] : []);
}
