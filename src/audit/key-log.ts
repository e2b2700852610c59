/**
 * The installation key log (issue 20 item 2, "rotation recorded in the log"): which Ed25519 key signed
 * for the installation when, hash-chained like the token, webhook and approval policy logs
 * (chained-log.ts; layout in core/keys.ts `KEYS`):
 *
 *   KEYS / LOG#{seq:10}  type `key_event`: `seq`, `timestamp`, `action` (KEY_ACTIVATED: the first key;
 *                        KEY_ROTATED: every later one), `key_name`, `verifier_key`, `public_key` (raw,
 *                        base64), `fingerprint`, `previous_fingerprint` (null on KEY_ACTIVATED), `by`
 *                        {id, kind}, `reason`?, `statement` (the canonical JSON both keys signed),
 *                        `cross_signed`, `old_key_signature` (only when cross-signed),
 *                        `new_key_signature`; `prev_hash`, `hash`.
 *   KEYS / LOG_HEAD      `seq` and `head_hash`.
 *   KEYS / CURRENT       `fingerprint` and `seq` of the key in use: every change is conditioned on it,
 *                        so two processes recording the same change write one entry.
 *
 * The statement names the new key and the one it replaces; the new key's signature over it proves
 * possession, and the old key's (a rotation ALP made, `alp keys rotate`) lets whoever trusted the old
 * key follow the rotation without trusting the storage. Signatures are pure Ed25519 over the
 * statement's UTF-8 bytes (its `_type` keeps them apart from DSSE's PAE and checkpoint notes).
 */
import { verify } from 'node:crypto';
import { canonicalJson } from '../core/canonical-json.ts';
import { type Digest, sha256 } from '../core/digest.ts';
import { KEY_CURRENT_SK, KEY_LOG_HEAD_SK, KEY_LOG_SK_PREFIX, KEYS_PK, keyLogSk } from '../core/keys.ts';
import { cond, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { ed25519PublicKey, type Signer } from '../system/signing-key.ts';
import { type ChainedLog, commitLogged, readLog, verifyLog } from './chained-log.ts';
import { verifierKey } from './tlog/note.ts';
import type { ChainFinding, ChainReport } from './verify.ts';

/** The report name of the key log among the chains `alp audit verify` lists. */
export const KEY_LOG_ID = 'key-log';
export const KEY_STATEMENT_TYPE = 'urn:alp:installation-key:v1';

export type KeyAction = 'KEY_ACTIVATED' | 'KEY_ROTATED';

export interface KeyEventDraft {
  action: KeyAction;
  key_name: string;
  verifier_key: string;
  public_key: string;
  fingerprint: string;
  previous_fingerprint: string | null;
  by: { id: string; kind: string };
  reason?: string | undefined;
  statement: string;
  cross_signed: boolean;
  old_key_signature?: string | undefined;
  new_key_signature: string;
}

export type KeyEvent = KeyEventDraft & { seq: number; timestamp: string; prev_hash: Digest | null; hash: Digest };

const KEY_LOG: ChainedLog = {
  id: KEY_LOG_ID,
  pk: KEYS_PK,
  entryPrefix: KEY_LOG_SK_PREFIX,
  entrySk: keyLogSk,
  headSk: KEY_LOG_HEAD_SK,
  entryType: 'key_event',
  headType: 'key_log_head',
};

const CURRENT_KEY = { PK: KEYS_PK, SK: KEY_CURRENT_SK };

/** `sha256:` and the hex SHA-256 of the raw public key: a key's name in the log, and the `keyid` of the envelopes it signs. */
export function keyFingerprint(publicKey: Uint8Array): Digest {
  return sha256(publicKey);
}

/** The statement a key change signs: canonical JSON naming the new key and the one it replaces. */
export function keyStatement(e: Pick<KeyEventDraft, 'action' | 'key_name' | 'public_key' | 'fingerprint' | 'previous_fingerprint'>) {
  return canonicalJson({
    _type: KEY_STATEMENT_TYPE,
    action: e.action,
    key_name: e.key_name,
    public_key: e.public_key,
    fingerprint: e.fingerprint,
    previous_fingerprint: e.previous_fingerprint,
  });
}

/**
 * Records a key change: the entry, and CURRENT moved from `draft.previous_fingerprint` (created when
 * null). ConditionFailed (failedIndex 0) when CURRENT is not what the draft replaces: someone else
 * recorded a change first.
 */
export async function commitKeyChange(ctx: ServiceContext, draft: KeyEventDraft): Promise<KeyEvent> {
  const set = { fingerprint: draft.fingerprint };
  const op: TransactOp =
    draft.previous_fingerprint === null
      ? { op: 'put', item: { ...CURRENT_KEY, type: 'installation_key_current', ...set }, condition: cond.notExists() }
      : { op: 'update', key: CURRENT_KEY, update: { set }, condition: cond.eq('fingerprint', draft.previous_fingerprint) };
  const [entry] = await commitLogged(ctx, KEY_LOG, [op], [draft as unknown as Record<string, unknown>], 'installation-keys');
  return entry as unknown as KeyEvent;
}

/** The fingerprint CURRENT names (one consistent read), undefined before the first key is recorded. */
export async function currentKeyFingerprint(ctx: Pick<ServiceContext, 'items'>): Promise<string | undefined> {
  const item = await ctx.items.get(CURRENT_KEY, { consistent: true });
  return typeof item?.fingerprint === 'string' ? item.fingerprint : undefined;
}

export async function readKeyLog(ctx: Pick<ServiceContext, 'items'>): Promise<KeyEvent[]> {
  const out: KeyEvent[] = [];
  for await (const e of readLog(ctx, KEY_LOG)) out.push(e as unknown as KeyEvent);
  return out;
}

function verifies(publicKeyB64: string, message: string, signatureB64: string | undefined): boolean {
  if (typeof signatureB64 !== 'string') return false;
  try {
    return verify(
      null,
      Buffer.from(message, 'utf8'),
      ed25519PublicKey(Buffer.from(publicKeyB64, 'base64')),
      Buffer.from(signatureB64, 'base64'),
    );
  } catch {
    return false;
  }
}

/** What is wrong with one entry given the one before it (undefined at seq 1) and the keys seen so far. */
export function keyEventProblems(e: KeyEvent, prev: KeyEvent | undefined, seen: ReadonlySet<string>): string[] {
  const out: string[] = [];
  const raw = Buffer.from(String(e.public_key), 'base64');
  if (keyFingerprint(raw) !== e.fingerprint) out.push('the fingerprint is not the sha256 of the public key');
  else if (verifierKey(e.key_name, raw) !== e.verifier_key) out.push('the verifier key does not match the public key');
  if (e.statement !== keyStatement(e)) out.push('the signed statement does not name this entry’s key');
  if (!verifies(e.public_key, e.statement, e.new_key_signature)) out.push('the new key’s signature over the statement does not verify');
  const expected: KeyAction = prev ? 'KEY_ROTATED' : 'KEY_ACTIVATED';
  if (e.action !== expected) out.push(`${String(e.action)} where ${expected} was expected`);
  if (e.previous_fingerprint !== (prev?.fingerprint ?? null)) out.push('previous_fingerprint is not the key the entry before recorded');
  if (seen.has(e.fingerprint)) out.push(`the key ${e.fingerprint} was recorded before (a retired key came back)`);
  if (e.cross_signed !== (e.old_key_signature !== undefined)) out.push('cross_signed does not say whether the old key signed');
  if (e.cross_signed && (!prev || !verifies(prev.public_key, e.statement, e.old_key_signature)))
    out.push('the old key’s cross-signature over the statement does not verify');
  return out;
}

/**
 * The chain (hashes, links, head: verifyLog), every entry's signatures and continuity
 * (keyEventProblems), and that CURRENT names the last entry's key.
 */
export async function verifyKeyLog(ctx: Pick<ServiceContext, 'items'>): Promise<ChainReport> {
  const report = await verifyLog(ctx, KEY_LOG);
  const findings: ChainFinding[] = [...report.findings];
  const entries = await readKeyLog(ctx);
  const seen = new Set<string>();
  entries.forEach((e, i) => {
    for (const problem of keyEventProblems(e, entries[i - 1], seen))
      findings.push({ artifact_id: KEY_LOG_ID, row: `${KEYS_PK} ${keyLogSk(e.seq)}`, problem: `entry ${e.seq}: ${problem}` });
    seen.add(e.fingerprint);
  });
  const current = await currentKeyFingerprint(ctx);
  if (current !== entries[entries.length - 1]?.fingerprint)
    findings.push({
      artifact_id: KEY_LOG_ID,
      row: `${KEYS_PK} ${KEY_CURRENT_SK}`,
      problem: `CURRENT names ${current ?? 'no key'}, the log's last key is ${entries[entries.length - 1]?.fingerprint ?? 'none'}`,
    });
  return { ...report, ok: findings.length === 0, findings };
}

/**
 * The entry of a change to `next` from `old` (none: the first key), signed by `next` and, when
 * `crossSign`, by `old` too.
 */
export async function keyChangeDraft(
  old: Signer | undefined,
  next: Signer,
  opts: { by: { id: string; kind: string }; reason?: string | undefined; crossSign: boolean },
): Promise<KeyEventDraft> {
  const base = {
    action: (old ? 'KEY_ROTATED' : 'KEY_ACTIVATED') as KeyAction,
    key_name: next.name,
    public_key: Buffer.from(next.publicKey).toString('base64'),
    fingerprint: keyFingerprint(next.publicKey),
    previous_fingerprint: old ? keyFingerprint(old.publicKey) : null,
  };
  const statement = keyStatement(base);
  const message = Buffer.from(statement, 'utf8');
  const crossSigner = opts.crossSign ? old : undefined;
  return {
    ...base,
    verifier_key: verifierKey(next.name, next.publicKey),
    by: opts.by,
    reason: opts.reason,
    statement,
    cross_signed: crossSigner !== undefined,
    old_key_signature: crossSigner ? Buffer.from(await crossSigner.sign(message)).toString('base64') : undefined,
    new_key_signature: Buffer.from(await next.sign(message)).toString('base64'),
  };
}
