/**
 * Aliases (issue 20 item 6): named pointers per artifact (`@prod`, `@staging`) to one of its versions.
 *
 * - Only humans set, move or remove them (the access table's `moveAlias`; agents and services are
 *   FORBIDDEN here too, whatever the entry point).
 * - A set or move needs its target APPROVED or EXECUTED when it commits (a condition on the version
 *   item's state in the same transaction). The alias then stays where it was put: when the version
 *   later moves on (EXECUTING, COMPENSATED, SUPERSEDED, ARCHIVED…) `@prod` still names it, and every
 *   read of it keeps working (an archived version is read from its archive copy); a write through it
 *   is judged by the state machine like any version number. Views show the target's current state.
 * - Every change is an `alias` audit entry of the artifact's chain (commitAudited, one transaction
 *   with the HEAD's `aliases` map, which `audit verify` replays: audit/alias-chain.ts).
 * - Names: `^[a-z][a-z0-9_-]{0,31}$` — lowercase only, compared exactly; `@Prod` is refused (INVALID,
 *   with the lowercase form suggested), never folded. At most MAX_ALIASES per artifact, on its HEAD
 *   (no installation-wide item).
 * - Resolution (`resolveVersionRef`): wherever a version number is accepted, `@name` reads the HEAD
 *   (strongly consistent) and answers the alias's version; no alias of that name is NOT_FOUND.
 */
import { type AliasMap, type AliasRecord, aliasesOf, aliasRecordOf } from '../audit/alias-chain.ts';
import { type AuditDraft, readBackOr, readHead, runAudited } from '../audit/chain.ts';
import { Conflict, InvalidInput, NotFound } from '../core/errors.ts';
import { aliasSk, versionSk } from '../core/keys.ts';
import type { HeadItem } from '../core/model.ts';
import { cond, type TransactOp } from '../store/item-store.ts';
import { getListed } from '../store/merge-query.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced } from '../system/fence.ts';
import { assertActor } from './access.ts';
import { ALIAS_NAME_PATTERN, type Principal, type VersionItem } from './model.ts';
import type { VersionState } from './state-machine.ts';
import { validateText, validateVersionNumber } from './validation.ts';
import { readVersion } from './versions.ts';

export { type AliasMap, type AliasRecord, aliasesOf } from '../audit/alias-chain.ts';
export { ALIAS_NAME_PATTERN, ALIAS_REF_PATTERN } from './model.ts';

export const MAX_ALIASES = 32;
/** The states an alias may be set or moved to. */
export const ALIAS_TARGET_STATES: readonly VersionState[] = ['APPROVED', 'EXECUTED'];

const NAME = new RegExp(ALIAS_NAME_PATTERN);

/** An alias name (without `@`): lowercase letters, digits, `_` and `-`, a letter first, 1–32 characters. */
export function validateAliasName(name: unknown): string {
  const text = typeof name === 'string' && name.startsWith('@') ? name.slice(1) : name;
  if (typeof text === 'string' && NAME.test(text)) return text;
  const lower = typeof text === 'string' ? text.toLowerCase() : '';
  const hint = lower !== text && NAME.test(lower) ? ` (alias names are lowercase: did you mean @${lower}?)` : '';
  throw new InvalidInput(`alias name must match ${ALIAS_NAME_PATTERN}${hint}`, { alias: String(text).slice(0, 64) });
}

/** `@name` (an alias), or a version number (a number, or its decimal text). */
export type VersionRef = { alias: string } | { version: number };

export function parseVersionRef(ref: number | string): VersionRef {
  if (typeof ref === 'string' && ref.startsWith('@')) return { alias: validateAliasName(ref.slice(1)) };
  try {
    return { version: validateVersionNumber(ref) };
  } catch {
    throw new InvalidInput('version must be a positive integer or @alias', { version: String(ref).slice(0, 64) });
  }
}

/** The version number `ref` names on `artifactId` (an alias read from the HEAD). */
export async function resolveVersionRef(ctx: ServiceContext, artifactId: string, ref: number | string): Promise<number> {
  const parsed = parseVersionRef(ref);
  if ('version' in parsed) return parsed.version;
  return aliasTarget(await readHead(ctx, artifactId), parsed.alias).version;
}

function aliasTarget(head: HeadItem, name: string): AliasRecord {
  const record = aliasesOf(head)[name];
  if (!record) throw new NotFound(`artifact ${head.artifact_id} has no alias @${name}`, { alias: name });
  return record;
}

/** An alias as the API, the CLI and the UI show it: with its target's current state. */
export interface AliasView extends AliasRecord {
  name: string;
  /** The target version's state now (it may have moved on since the alias was set). */
  state: string;
}

export async function listAliases(ctx: ServiceContext, artifactId: string): Promise<AliasView[]> {
  const head = await readHead(ctx, artifactId);
  return aliasViews(ctx, head);
}

/** The HEAD's aliases by name, each with its target's current state (one batch read of the targets). */
export async function aliasViews(ctx: ServiceContext, head: HeadItem): Promise<AliasView[]> {
  const entries = Object.entries(aliasesOf(head)).sort(([a], [b]) => (a < b ? -1 : 1));
  const versions = await getListed(
    ctx.items,
    entries.map(([, r]) => ({ PK: head.PK, SK: versionSk(r.version) })),
  );
  return entries.map(([name, r], i) => ({ name, ...r, state: String((versions[i] as VersionItem | undefined)?.state ?? 'unknown') }));
}

export interface AliasChange {
  alias: AliasView | null;
  /** False when the alias already pointed there (nothing recorded). */
  changed: boolean;
}

/** Sets `name` to `version` (a number or another alias), or moves it there; humans only. */
export async function setAlias(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  name: string,
  version: number | string,
  reason?: string,
): Promise<AliasChange> {
  assertActor('moveAlias', actor);
  const alias = validateAliasName(name);
  const why = reason === undefined ? undefined : validateText('reason', reason, { max: 1000 });
  const n = await resolveVersionRef(ctx, artifactId, version);
  await assertNotFenced(ctx, { kind: 'artifacts', ids: [artifactId] });
  let unchanged = false;
  const result = await runAudited(ctx, [artifactId], async (heads) => {
    const head = heads[artifactId] as HeadItem;
    assertChangeable(head);
    const v = await readVersion(ctx.items, artifactId, n);
    if (!ALIAS_TARGET_STATES.includes(v.state))
      throw new Conflict(`@${alias} can point only at an APPROVED or EXECUTED version; v${n} is ${v.state}`, {
        reason: 'ALIAS_TARGET_STATE',
        version: n,
        state: v.state,
      });
    const aliases = aliasesOf(head);
    const previous = aliases[alias];
    unchanged = previous?.version === n;
    if (unchanged) return { chains: [] };
    if (!previous && Object.keys(aliases).length >= MAX_ALIASES)
      throw new Conflict(`artifact ${artifactId} has ${MAX_ALIASES} aliases, the most it may have`);
    const draft = aliasDraft({
      alias,
      seq: head.audit_seq + 1,
      action: previous ? 'moved' : 'set',
      version: n,
      previous,
      target: v,
      actor,
      reason: why,
    });
    return {
      chains: [{ artifactId, entries: [draft.entry], headSet: { aliases: draft.headAliases(aliases) } }],
      ops: [targetStillAliasable(v)],
    };
  });
  const committed = result.items[0];
  if (unchanged || !committed) {
    const head = await readHead(ctx, artifactId);
    return { alias: (await aliasViews(ctx, head)).find((a) => a.name === alias) ?? null, changed: false };
  }
  const view = await readBackOr(
    async () => (await listAliases(ctx, artifactId)).find((a) => a.name === alias) ?? null,
    () => ({ name: alias, ...aliasRecordOf(committed), state: 'unknown' }),
  );
  return { alias: view, changed: true };
}

/** Removes `name`; humans only. NOT_FOUND when the artifact has no such alias. */
export async function removeAlias(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  name: string,
  reason?: string,
): Promise<{ removed: AliasRecord & { name: string } }> {
  assertActor('moveAlias', actor);
  const alias = validateAliasName(name);
  const why = reason === undefined ? undefined : validateText('reason', reason, { max: 1000 });
  await assertNotFenced(ctx, { kind: 'artifacts', ids: [artifactId] });
  let removed: AliasRecord | undefined;
  await runAudited(ctx, [artifactId], (heads) => {
    const head = heads[artifactId] as HeadItem;
    assertChangeable(head);
    const aliases = aliasesOf(head);
    removed = aliasTarget(head, alias);
    const draft = aliasDraft({
      alias,
      seq: head.audit_seq + 1,
      action: 'removed',
      version: removed.version,
      previous: removed,
      actor,
      reason: why,
    });
    return { chains: [{ artifactId, entries: [draft.entry], headSet: { aliases: draft.headAliases(aliases) } }] };
  });
  return { removed: { name: alias, ...(removed as AliasRecord) } };
}

/** An archived (or archiving) artifact's aliases stay as they are: still resolvable, no longer moved. */
function assertChangeable(head: HeadItem): void {
  if (head.archived) throw new Conflict(`artifact ${head.artifact_id} is archived: its aliases no longer move`);
}

/** The target is still in an aliasable state when the move commits. */
function targetStillAliasable(v: VersionItem): TransactOp {
  return {
    op: 'check',
    key: { PK: v.PK, SK: v.SK },
    condition: cond.in('state', [...ALIAS_TARGET_STATES]),
  };
}

interface AliasMove {
  alias: string;
  /** The entry's sequence number: the only entry of its chain in the transaction, so the HEAD's audit_seq + 1. */
  seq: number;
  action: 'set' | 'moved' | 'removed';
  version: number;
  previous: AliasRecord | undefined;
  target?: VersionItem;
  actor: Principal;
  reason: string | undefined;
}

/**
 * The `alias` entry (docs/audit-format.md) and the HEAD's aliases after it: the same record
 * `replayAliases` derives from the entry.
 */
function aliasDraft(m: AliasMove): { entry: AuditDraft; headAliases: (current: AliasMap) => AliasMap } {
  const fields = {
    alias: m.alias,
    action: m.action,
    version: m.version,
    previous_version: m.previous?.version ?? null,
    actor: m.actor,
    ...(m.target ? { content_hash: m.target.content_hash, target_state: m.target.state } : {}),
    ...(m.reason === undefined ? {} : { reason: m.reason }),
  };
  const entry: AuditDraft = { type: 'alias', keys: (seq, ts) => ({ SK: aliasSk(ts, seq) }), fields };
  return {
    entry,
    headAliases: (current) => {
      const next = { ...current };
      if (m.action === 'removed') delete next[m.alias];
      else next[m.alias] = { version: m.version, content_hash: m.target?.content_hash as string, set_by: m.actor, seq: m.seq };
      return next;
    },
  };
}
