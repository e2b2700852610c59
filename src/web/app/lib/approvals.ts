/**
 * Whether an approval counts, in words, for every view that shows one (approvals tab, history,
 * version page). The API records `counted` and `not_counted_reason` when the decision is given; an
 * approval counted then stops counting when it expires or when the version is proposed again (a new
 * round). The API does not say which round a version is in now, so a later round is seen from the
 * decisions given on it.
 */

export interface DecisionLike {
  version: number;
  decision: string;
  counted?: boolean | undefined;
  not_counted_reason?: string | undefined;
  expires_at?: string | undefined;
  round?: number | undefined;
}

export type Standing =
  | { kind: 'rejection'; label: string }
  | { kind: 'counted'; label: string }
  /** Counted when given, no longer counts. */
  | { kind: 'lapsed'; label: string; reason: string }
  | { kind: 'not-counted'; label: string; reason: string };

/** The latest proposal round each version has a decision in. */
export function latestRounds(decisions: DecisionLike[]): Map<number, number> {
  const rounds = new Map<number, number>();
  for (const d of decisions) {
    if (typeof d.round !== 'number') continue;
    rounds.set(d.version, Math.max(rounds.get(d.version) ?? 0, d.round));
  }
  return rounds;
}

export function approvalStanding(a: DecisionLike, now: number, latestRound?: number): Standing {
  if (a.decision !== 'APPROVE') return { kind: 'rejection', label: 'rejection' };
  if (a.counted !== true) {
    return { kind: 'not-counted', label: 'not counted', reason: a.not_counted_reason ?? 'no reason recorded' };
  }
  if (latestRound !== undefined && typeof a.round === 'number' && a.round < latestRound) {
    return {
      kind: 'lapsed',
      label: 'no longer counted',
      reason: `counted in proposal round ${a.round}; the version was proposed again (round ${latestRound})`,
    };
  }
  const expires = a.expires_at === undefined ? Number.NaN : Date.parse(a.expires_at);
  if (Number.isFinite(expires) && expires <= now) {
    return { kind: 'lapsed', label: 'no longer counted', reason: 'counted when given; it has expired since' };
  }
  return { kind: 'counted', label: 'counted' };
}

/** "counted", "not counted: binds sha256:…", "no longer counted: …" */
export function standingText(s: Standing): string {
  return 'reason' in s ? `${s.label}: ${s.reason}` : s.label;
}

export type TextPart = { text: string } | { digest: string };

/** A text cut around the sha256 digests it names, so each can be shown short (with its full value kept). */
export function splitDigests(text: string): TextPart[] {
  const parts: TextPart[] = [];
  const re = /sha256:[0-9a-f]{64}/g;
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) parts.push({ text: text.slice(last, m.index) });
    parts.push({ digest: m[0] });
    last = m.index + m[0].length;
  }
  if (last < text.length) parts.push({ text: text.slice(last) });
  return parts;
}
