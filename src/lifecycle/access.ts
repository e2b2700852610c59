/**
 * Who may do what: the one access table every entry point asks (the HTTP routes, the CLI commands,
 * and the services themselves for the operations that take an actor, so a future client cannot skip
 * it). Each operation lists the principal kinds that may perform it.
 *
 * - `human`: everything an agent may do, plus approving, rejecting, archiving, moving aliases, minting
 *   tokens, managing webhook endpoints, changing the installation approval policy and fixing the CLI
 *   clock (ALP_NOW).
 * - `agent`: create artifacts and versions, propose and withdraw, start, upload to and finish
 *   executions, create compensations, append provenance; read everything.
 * - `service`: read only (exporters, dashboards).
 *
 * The local operator (the OS user running the CLI with no token) is allowed every operation: holding
 * the installation's storage already gives that power. Operations with no kind listed are the
 * operator's alone; a token never reaches them — a human token is a human, not the operator — and
 * none of them has an HTTP route.
 */
import { Forbidden } from '../core/errors.ts';
import type { Principal, PrincipalKind } from './model.ts';

const READERS = ['human', 'agent', 'service'] as const;
const WRITERS = ['human', 'agent'] as const;
const HUMANS = ['human'] as const;
const OPERATOR_ONLY = [] as const;

export const OPERATIONS = {
  read: READERS,
  createArtifact: WRITERS,
  addVersion: WRITERS,
  /** propose, withdraw and the manual moves of `transition` (the state machine has no others). */
  propose: WRITERS,
  decide: HUMANS,
  archive: HUMANS,
  /** Setting, moving and removing an alias (@prod): which version a name points at is a human's decision. */
  moveAlias: HUMANS,
  startExecution: WRITERS,
  uploadOutput: WRITERS,
  finishExecution: WRITERS,
  compensate: WRITERS,
  addProvenance: WRITERS,
  createToken: HUMANS,
  /** Adding, removing, re-enabling and listing webhook endpoints (where events go, with what secret). */
  manageWebhooks: HUMANS,
  /** Fixing the clock (ALP_NOW): a token-bound agent could otherwise revive an expired approval. */
  setClock: HUMANS,
  /** Changing the installation approval policy (quorum minimums, self-approval, lifetime, evidence). */
  setApprovalPolicy: HUMANS,

  // The operator's alone.
  install: OPERATOR_ONLY,
  serve: OPERATOR_ONLY,
  backup: OPERATOR_ONLY,
  restore: OPERATOR_ONLY,
  reconcile: OPERATOR_ONLY,
  retention: OPERATOR_ONLY,
  maintenance: OPERATOR_ONLY,
  epoch: OPERATOR_ONLY,
  telemetry: OPERATOR_ONLY,
  compaction: OPERATOR_ONLY,
  storageRules: OPERATOR_ONLY,
} as const satisfies Record<string, readonly PrincipalKind[]>;

export type Operation = keyof typeof OPERATIONS;

/** Who is asking: a principal, and whether it is the local operator (CLI, no token). */
export interface Caller {
  principal: Principal;
  operator: boolean;
}

export function kindsFor(operation: Operation): readonly PrincipalKind[] {
  return OPERATIONS[operation];
}

export function isOperatorOnly(operation: Operation): boolean {
  return kindsFor(operation).length === 0;
}

export function mayPerform(operation: Operation, caller: Caller): boolean {
  return caller.operator || kindsFor(operation).includes(caller.principal.kind);
}

export function describeKinds(operation: Operation): string {
  return isOperatorOnly(operation)
    ? 'the local operator (the CLI with no token)'
    : `a principal of kind ${kindsFor(operation).join(' or ')}`;
}

/** FORBIDDEN unless the caller may perform the operation. */
export function assertMay(operation: Operation, caller: Caller): void {
  if (mayPerform(operation, caller)) return;
  const { id, kind } = caller.principal;
  throw new Forbidden(`${operation} needs ${describeKinds(operation)}; ${id} is ${kind}`, { principal: id, kind, operation });
}

/**
 * The service-level check of an operation that takes an actor. The local operator acts as a human
 * there, and every such operation allows humans, so the operator is never refused by it.
 */
export function assertActor(operation: Operation, actor: Principal): void {
  assertMay(operation, { principal: actor, operator: false });
}
