/**
 * The webhook event types (Standard Webhooks' `group.event` names) and the endpoint filters over them.
 * Each outbox record maps to exactly one type (events.ts): an artifact chain entry by its audit type
 * (a transition by the state it moved to), an installation event (pins, backups) by its own type.
 */
import { InvalidInput } from '../core/errors.ts';
import { VERSION_STATES } from '../lifecycle/states.ts';

export const WEBHOOK_EVENT_TYPES: readonly string[] = [
  'version.created',
  ...VERSION_STATES.map((s) => `version.${s.toLowerCase()}`),
  'approval.recorded',
  'execution.started',
  'execution.output_uploaded',
  'execution.finished',
  'provenance.added',
  'compensation.created',
  'alias.set',
  'alias.moved',
  'alias.removed',
  'pin.added',
  'pin.removed',
  'backup.retired',
];

const GROUPS = new Set(WEBHOOK_EVENT_TYPES.map((t) => t.slice(0, t.indexOf('.'))));

/**
 * An endpoint's filter from `--events`: exact types, `group.*`, or `*` (everything). Unknown names are
 * refused with the list, so a typo never silently subscribes to nothing.
 */
export function parseEventFilter(patterns: readonly string[]): string[] {
  const cleaned = [...new Set(patterns.map((p) => p.trim()).filter((p) => p !== ''))];
  if (cleaned.length === 0) throw new InvalidInput('name at least one event type (--events version.approved,execution.* or *)');
  for (const p of cleaned) {
    const known = p === '*' || WEBHOOK_EVENT_TYPES.includes(p) || (p.endsWith('.*') && GROUPS.has(p.slice(0, -2)));
    if (!known)
      throw new InvalidInput(
        `unknown webhook event type ${JSON.stringify(p)}: one of *, ${[...GROUPS].map((g) => `${g}.*`).join(', ')}, ${WEBHOOK_EVENT_TYPES.join(', ')}`,
        {
          event: p,
        },
      );
  }
  return cleaned.sort();
}

export function matchesFilter(filter: readonly string[], type: string): boolean {
  return filter.some((p) => p === '*' || p === type || (p.endsWith('.*') && type.startsWith(p.slice(0, -1))));
}
