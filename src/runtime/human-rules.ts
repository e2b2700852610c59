/**
 * The "only humans decide" rules an entry point applies before it calls an operation that takes a
 * plain principal id (advancing the epoch, retiring or abandoning a backup, activating a restore,
 * recovering the maintenance fence, naming a retention approver). One place, so the CLI and any
 * later entry point refuse the same callers with the same words.
 */
import { Forbidden, UsageError } from '../core/errors.ts';
import type { Principal } from '../lifecycle/model.ts';
import { validatePrincipalId } from '../lifecycle/principals.ts';

/** `principal` when it is a human; else Forbidden: "<what> needs a human operator, not <kind> <id>". */
export function requireHuman(principal: Principal, what: string): Principal {
  if (principal.kind !== 'human') throw new Forbidden(`${what} needs a human operator, not ${principal.kind} ${principal.id}`);
  return principal;
}

/**
 * Who approves a retention run: the acting principal, or the human it names. Only a human may name
 * another approver (an agent or service naming a human would approve on that human's behalf).
 */
export function retentionApprover(actor: Principal, named: string | undefined): Principal {
  if (!named) return actor;
  const approver = { id: validatePrincipalId(named), kind: 'human' as const };
  if (named !== actor.id && actor.kind !== 'human') throw new UsageError('only a human operator may name another approver');
  return approver;
}
