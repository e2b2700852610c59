/**
 * The remote CLI's config file: named profiles, each a server URL and (optionally) its bearer token.
 *
 *   { "profiles": { "prod": { "server": "https://alp.example", "token": "alp_…" } } }
 *
 * It holds secrets, so it is written with mode 0600 (its directory 0700), atomically (a temp file
 * beside it, renamed), and it is refused — never read — when it is not the caller's own file or when
 * its group or others have any permission on it (as ssh refuses a readable private key): exit 2 with the
 * chmod that fixes it. Where it lives: ALP_CONFIG, else $XDG_CONFIG_HOME/alp/config.json, else
 * ~/.config/alp/config.json.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { NotFound, UsageError } from '../core/errors.ts';

export interface Profile {
  server: string;
  token?: string | undefined;
}

export interface ProfileFile {
  profiles: Record<string, Profile>;
}

const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_CONFIG_BYTES = 1024 * 1024;

/** Where the config file is. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.ALP_CONFIG) return path.resolve(env.ALP_CONFIG);
  const base = env.XDG_CONFIG_HOME ? path.resolve(env.XDG_CONFIG_HOME) : path.join(os.homedir(), '.config');
  return path.join(base, 'alp', 'config.json');
}

export function checkProfileName(name: string): string {
  if (!PROFILE_NAME.test(name))
    throw new UsageError(`profile name ${JSON.stringify(name)}: 1–64 of A-Z a-z 0-9 . _ -, starting with a letter or digit`);
  return name;
}

/**
 * A server URL the CLI may send a token to: http or https, no credentials, query or fragment in it.
 * `given` names where it came from, for the message.
 */
export function checkServerUrl(url: string, given: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`${given}: ${JSON.stringify(url)} is not a URL (e.g. http://127.0.0.1:8787)`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError(`${given}: ${url} is not an http or https URL`);
  if (u.username || u.password) throw new UsageError(`${given}: no credentials in the URL; give the token with --token or ALP_TOKEN`);
  if (u.search || u.hash) throw new UsageError(`${given}: ${url} has a query or fragment; give the server's base URL`);
  return u.toString().replace(/\/+$/, '');
}

/** The profiles, or none when the file does not exist; refused when others may read it (see above). */
export async function readProfiles(file = configPath()): Promise<ProfileFile> {
  let fh: fs.FileHandle;
  try {
    fh = await fs.open(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: {} };
    throw new UsageError(`cannot read the config file ${file} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new UsageError(`the config file ${file} is not a regular file`);
    assertPrivate(file, st);
    if (st.size > MAX_CONFIG_BYTES) throw new UsageError(`the config file ${file} is larger than ${MAX_CONFIG_BYTES} bytes`);
    return parseProfiles(await fh.readFile('utf8'), file);
  } finally {
    await fh.close();
  }
}

/** Refuses a config file another user owns, or one whose group or others have any permission. */
function assertPrivate(file: string, st: { mode: number; uid: number }): void {
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    throw new UsageError(`the config file ${file} belongs to uid ${st.uid}, not to you (uid ${uid}): it holds tokens; refusing to use it`, {
      file,
      uid: st.uid,
    });
  }
  const mode = st.mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new UsageError(
      `the config file ${file} is open to other users (mode ${mode.toString(8).padStart(4, '0')}): it holds tokens; run \`chmod 600 ${file}\``,
      { file, mode: mode.toString(8).padStart(4, '0') },
    );
  }
}

function parseProfiles(text: string, file: string): ProfileFile {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`the config file ${file} is not JSON: ${(e as Error).message}`);
  }
  const profiles = (doc as { profiles?: unknown } | null)?.profiles;
  if (typeof doc !== 'object' || doc === null || (profiles !== undefined && (typeof profiles !== 'object' || profiles === null))) {
    throw new UsageError(`the config file ${file} must be {"profiles": {NAME: {"server": URL, "token": T}}}`);
  }
  const out: Record<string, Profile> = {};
  for (const [name, p] of Object.entries((profiles ?? {}) as Record<string, unknown>)) {
    const server = (p as { server?: unknown } | null)?.server;
    const token = (p as { token?: unknown } | null)?.token;
    if (typeof server !== 'string' || (token !== undefined && typeof token !== 'string')) {
      throw new UsageError(
        `the config file ${file}: profile ${JSON.stringify(name)} needs "server" (a URL) and optionally "token" (a string)`,
      );
    }
    out[name] = { server, ...(token === undefined ? {} : { token }) };
  }
  return { profiles: out };
}

/** The profile named `name` (NOT_FOUND naming the file when it has none). */
export async function readProfile(name: string, file = configPath()): Promise<Profile> {
  const { profiles } = await readProfiles(file);
  const p = Object.hasOwn(profiles, name) ? profiles[name] : undefined;
  if (!p) {
    const known = Object.keys(profiles);
    throw new NotFound(
      `no profile ${JSON.stringify(name)} in ${file}${known.length ? ` (it has ${known.join(', ')})` : ''}: add it with \`alp profile set ${name} --server URL\``,
    );
  }
  return p;
}

/**
 * Writes the whole file: a new file (mode 0600) beside it, fsynced, renamed over it, so a reader sees
 * the old file or the new one and the secret is never in a file others can read. The directory is made
 * 0700 when it has to be created.
 */
export async function writeProfiles(doc: ProfileFile, file = configPath()): Promise<void> {
  const dir = path.dirname(file);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const fh = await fs.open(tmp, 'wx', 0o600);
  try {
    // The mode asked for at creation is masked by the umask: make sure of 0600 whatever it is.
    await fh.chmod(0o600);
    await fh.writeFile(`${JSON.stringify(doc, null, 2)}\n`, 'utf8');
    await fh.sync();
    await fh.close();
    await fs.rename(tmp, file);
  } catch (e) {
    await fh.close().catch(() => {});
    await fs.rm(tmp, { force: true });
    throw e;
  }
}
