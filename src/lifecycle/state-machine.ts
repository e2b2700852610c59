/**
 * The version state machine (docs/design.md §2) as one table. Every entry point asks this table; nothing else
 * decides whether a move is legal. `via` names the only operation that may perform the move, so a
 * generic `transition --to` cannot bypass approvals, executions, compensation or archiving.
 */
import { IllegalTransition } from '../core/errors.ts';
import { VERSION_STATES, type VersionState } from './states.ts';

export { VERSION_STATES, type VersionState } from './states.ts';

export type TransitionVia = 'manual' | 'supersede' | 'approval' | 'rejection' | 'reproposal' | 'execution' | 'compensation' | 'archive';

export interface Move {
  from: VersionState;
  to: VersionState;
  via: TransitionVia;
}

export const SETTLED_STATES: readonly VersionState[] = ['REJECTED', 'SUPERSEDED', 'EXECUTED', 'FAILED', 'COMPENSATED'];
/** Versions in these states are superseded when a newer version is proposed. */
export const OPEN_STATES: readonly VersionState[] = ['DRAFT', 'PROPOSED', 'APPROVED'];

export const MOVES: readonly Move[] = [
  { from: 'DRAFT', to: 'PROPOSED', via: 'manual' },
  // Withdrawing a proposal returns it to DRAFT; approvals given before do not carry over.
  { from: 'PROPOSED', to: 'DRAFT', via: 'manual' },
  { from: 'PROPOSED', to: 'APPROVED', via: 'approval' },
  { from: 'PROPOSED', to: 'REJECTED', via: 'rejection' },
  // The way back when an approval expires before the run starts: proposing the APPROVED version again
  // opens a new round (the expired approvals no longer count); refused while the quorum is still valid.
  { from: 'APPROVED', to: 'PROPOSED', via: 'reproposal' },
  ...OPEN_STATES.map((from): Move => ({ from, to: 'SUPERSEDED', via: 'supersede' })),
  { from: 'APPROVED', to: 'EXECUTING', via: 'execution' },
  { from: 'EXECUTING', to: 'EXECUTED', via: 'execution' },
  { from: 'EXECUTING', to: 'FAILED', via: 'execution' },
  { from: 'EXECUTED', to: 'COMPENSATING', via: 'compensation' },
  { from: 'FAILED', to: 'COMPENSATING', via: 'compensation' },
  { from: 'COMPENSATING', to: 'COMPENSATED', via: 'compensation' },
  // A failed compensation returns the version to the state it was compensating from.
  { from: 'COMPENSATING', to: 'EXECUTED', via: 'compensation' },
  { from: 'COMPENSATING', to: 'FAILED', via: 'compensation' },
  ...SETTLED_STATES.map((from): Move => ({ from, to: 'ARCHIVED', via: 'archive' })),
];

const VIA_HINT: Record<TransitionVia, string> = {
  manual: 'alp artifact transition',
  supersede: 'proposing a newer version',
  approval: 'human approvals reaching the quorum (alp artifact approve)',
  rejection: 'a human rejection (alp artifact reject)',
  reproposal: 'alp artifact propose once the approvals have expired',
  execution: 'alp exec start / alp exec finish',
  compensation: 'alp compensate and the compensation artifact’s execution',
  archive: 'alp archive',
};

export function isVersionState(s: unknown): s is VersionState {
  return typeof s === 'string' && (VERSION_STATES as readonly string[]).includes(s);
}

export function findMove(from: VersionState, to: VersionState): Move | undefined {
  return MOVES.find((m) => m.from === from && m.to === to);
}

/** Returns the move or throws ILLEGAL_TRANSITION; `via` must be the operation asking. */
export function requireMove(from: VersionState, to: VersionState, via: TransitionVia): Move {
  const move = findMove(from, to);
  if (!move) throw new IllegalTransition(`illegal transition ${from} → ${to}`, { from, to });
  if (move.via !== via) {
    throw new IllegalTransition(`${from} → ${to} happens only through ${VIA_HINT[move.via]}`, { from, to, via: move.via });
  }
  return move;
}
