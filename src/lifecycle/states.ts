/**
 * The version states (docs/design.md §2), in lifecycle order. A module of its own, without imports, so the
 * web UI's bundle shares the one list with the state machine.
 */
export const VERSION_STATES = [
  'DRAFT',
  'PROPOSED',
  'APPROVED',
  'REJECTED',
  'SUPERSEDED',
  'EXECUTING',
  'EXECUTED',
  'FAILED',
  'COMPENSATING',
  'COMPENSATED',
  'ARCHIVED',
] as const;
export type VersionState = (typeof VERSION_STATES)[number];
