/**
 * What a CLI command acts on when the user names it loosely (issue 19 item A7):
 * - an artifact by its id or by its name, when exactly one artifact has that name (the name index,
 *   GSI1 NAME#{name}, through the artifact service's listing: never a scan);
 * - the version a command targets when `--version` is not given: the one in the state the command
 *   acts on (the PROPOSED version for approve, the APPROVED one for exec start…), else the latest.
 * A command that chose for the user says what it chose (outputChosen). The services still decide
 * whether the command may act on it. The rules read through a TargetLookup (backend.ts), so they are
 * the same whether the command runs on the installation or over HTTP (the API's list routes).
 */
import { AlpError, Conflict, NotFound } from '../core/errors.ts';
import { isUlid } from '../core/ids.ts';
import type { VersionState } from '../lifecycle/state-machine.ts';
import type { TargetLookup } from './backend.ts';
import type { GlobalOptions } from './options.ts';
import { output, parseIntOption } from './runtime.ts';

/** How many artifacts sharing a name an ambiguity error lists. */
const MAX_CANDIDATES = 10;

/** One of several artifacts that share a name, as the ambiguity error lists it. */
export interface NameCandidate {
  artifact_id: string;
  created_at: string;
  latest_version: number;
  state: string;
}

/**
 * The artifact id `ref` names: an existing artifact's id, else the one artifact named `ref`. No match
 * is NOT_FOUND; several are CONFLICT (details.reason AMBIGUOUS_NAME) listing the candidates.
 */
export async function resolveArtifactRef(lookup: TargetLookup, ref: string): Promise<string> {
  if (isUlid(ref) && (await lookup.artifactExists(ref))) return ref;
  const page = await lookup.artifactsNamed(ref, MAX_CANDIDATES).catch((e: unknown) => {
    // A text that cannot be a name (empty, control characters) names no artifact either.
    if (e instanceof AlpError && e.code === 'INVALID') return { items: [], cursor: undefined };
    throw e;
  });
  const [only, ...others] = page.items;
  if (!only) throw new NotFound(`no artifact ${ref} (no artifact has this id or name)`);
  if (others.length === 0) return String(only.artifact_id);
  const candidates = await Promise.all(page.items.map((h) => candidateOf(lookup, h)));
  const more = page.cursor !== undefined;
  throw new Conflict(
    `${candidates.length}${more ? '+' : ''} artifacts are named ${JSON.stringify(ref)}; give one's id: ${candidates
      .map((c) => `${c.artifact_id} (created ${c.created_at}, latest v${c.latest_version} ${c.state})`)
      .join('; ')}${more ? '; …' : ''}`,
    { reason: 'AMBIGUOUS_NAME', name: ref, candidates, more },
  );
}

async function candidateOf(lookup: TargetLookup, head: Record<string, unknown>): Promise<NameCandidate> {
  const id = String(head.artifact_id);
  const latest = Number(head.latest_version);
  const state = await lookup.versionState(id, latest).catch(() => 'unknown');
  return { artifact_id: id, created_at: String(head.created_at), latest_version: latest, state };
}

/** What a command targets when --version is not given. */
export type VersionTarget = 'latest' | 'proposed' | 'approved' | 'executed';

const TARGETS: Record<VersionTarget, { states: readonly VersionState[]; what: string }> = {
  latest: { states: [], what: 'the latest version' },
  proposed: { states: ['PROPOSED'], what: 'the PROPOSED version' },
  approved: { states: ['APPROVED'], what: 'the APPROVED version' },
  executed: { states: ['EXECUTED', 'FAILED'], what: 'the latest EXECUTED or FAILED version' },
};

/** The version chosen for the user, as the output reports it. */
export interface ChosenVersion {
  version: number;
  state: string;
  reason: string;
}

export interface VersionChoice {
  version: number;
  /** Set when --version was not given and the command chose. */
  chosen?: ChosenVersion;
}

/**
 * `--version N` as given; `--version @name` the version the alias names now (reported like a choice,
 * so the output says which version it was); else the version of `artifactId` the command targets
 * (see TARGETS).
 */
export async function chooseVersion(
  lookup: TargetLookup,
  artifactId: string,
  given: string | undefined,
  target: VersionTarget,
): Promise<VersionChoice> {
  if (given?.startsWith('@')) {
    const v = await lookup.aliasedVersion(artifactId, given as `@${string}`);
    return { version: v.version, chosen: { version: v.version, state: v.state, reason: `the alias ${given}` } };
  }
  const n = parseIntOption('--version', given, { min: 1 });
  if (n !== undefined) return { version: n };
  const { states, what } = TARGETS[target];
  if (states.length === 0) {
    const v = await lookup.latestVersion(artifactId);
    return { version: v.version, chosen: { version: v.version, state: v.state, reason: `${what} (--version not given)` } };
  }
  const versions = await lookup.versions(artifactId);
  const match = versions.findLast((v) => states.includes(v.state as VersionState));
  const v = match ?? versions.at(-1);
  if (!v) throw new NotFound(`artifact ${artifactId} has no versions`);
  const reason = match ? `${what} (--version not given)` : `the latest version (--version not given; none is ${states.join(' or ')})`;
  return { version: v.version, chosen: { version: v.version, state: v.state, reason } };
}

/**
 * Prints a result that may rest on a chosen version: with --json the document gains `chosen_version`;
 * else a note on stderr (stdout stays the result alone, e.g. the run id of `exec start`).
 */
export function outputChosen(
  opts: GlobalOptions,
  artifactId: string,
  choice: VersionChoice,
  value: Record<string, unknown>,
  human: () => string | string[],
): void {
  noteChosen(opts, artifactId, choice);
  output(opts, choice.chosen ? { ...value, chosen_version: choice.chosen } : value, human);
}

/** Without --json, the line on stderr that says which version was chosen (nothing when --version was given). */
export function noteChosen(opts: GlobalOptions, artifactId: string, { chosen }: VersionChoice): void {
  if (chosen && !opts.json) process.stderr.write(`alp: chose ${artifactId} v${chosen.version} (${chosen.state}): ${chosen.reason}\n`);
}
