/**
 * Which operation of the shared access table (src/lifecycle/access.ts) each CLI command performs.
 * openRuntime checks it for every command before the command runs: with no token the caller is the
 * local operator (allowed everything), with --token / ALP_TOKEN it is that token's principal. A
 * command missing here is treated as the operator's alone (a test keeps the table complete).
 */
import type { Command } from 'commander';
import type { Operation } from '../lifecycle/access.ts';

export const COMMAND_OPERATIONS: Readonly<Record<string, Operation>> = {
  start: 'serve',
  serve: 'serve',
  // Any token's principal may serve itself the MCP tools; each tool's service checks its own operation.
  mcp: 'read',
  init: 'install',
  'token create': 'createToken',
  'token list': 'createToken',
  'token revoke': 'createToken',
  'token rotate': 'createToken',
  'token log': 'createToken',
  verify: 'read',

  'artifact create': 'createArtifact',
  'artifact version': 'addVersion',
  'artifact show': 'read',
  'artifact list': 'read',
  'artifact get': 'read',
  'artifact propose': 'propose',
  'artifact withdraw': 'propose',
  'artifact transition': 'propose',
  'artifact approve': 'decide',
  'artifact reject': 'decide',
  archive: 'archive',
  'alias set': 'moveAlias',
  'alias rm': 'moveAlias',
  'alias list': 'read',
  search: 'read',

  'exec start': 'startExecution',
  'exec upload': 'uploadOutput',
  'exec finish': 'finishExecution',
  'exec run': 'startExecution',
  'exec show': 'read',
  compensate: 'compensate',

  history: 'read',
  'history show': 'read',
  'history compact': 'compaction',
  'audit verify': 'read',
  'audit checkpoint': 'read',
  'audit prove': 'read',
  'provenance add': 'addProvenance',
  'provenance show': 'read',
  'artifact attest': 'read',
  'keys show': 'read',
  'keys history': 'read',
  // Replaces the installation's private key: the operator's alone, where the storage is.
  'keys rotate': 'install',
  'query transitions': 'read',
  'query approvals': 'read',
  'query runs': 'read',
  'query provenance': 'read',
  'query compensations': 'read',

  'telemetry init': 'telemetry',
  'telemetry stats': 'telemetry',
  'telemetry enqueue': 'telemetry',
  'telemetry claim': 'telemetry',
  'telemetry ack': 'telemetry',
  'telemetry drain': 'telemetry',
  'telemetry exporters list': 'telemetry',
  'telemetry exporters remove': 'telemetry',
  'webhooks add': 'manageWebhooks',
  'webhooks list': 'manageWebhooks',
  'webhooks remove': 'manageWebhooks',
  'webhooks enable': 'manageWebhooks',
  'webhooks log': 'manageWebhooks',
  'webhooks changes': 'manageWebhooks',
  'policy show': 'read',
  'policy log': 'read',
  'policy set': 'setApprovalPolicy',
  // A delivery pass consumes the telemetry outbox: the operator's, like `telemetry drain`.
  'webhooks deliver': 'telemetry',
  'epoch show': 'epoch',
  'epoch advance': 'epoch',
  backup: 'backup',
  backups: 'backup',
  restore: 'restore',
  'backup-native export': 'backup',
  'backup-native status': 'backup',
  'backup-native list': 'backup',
  'backup-native restore': 'restore',
  reconcile: 'reconcile',
  'maintenance status': 'maintenance',
  'maintenance release': 'maintenance',
  'maintenance recount-states': 'maintenance',
  'search reindex': 'maintenance',
  'lifecycle apply': 'storageRules',
  'lifecycle status': 'storageRules',
  'retention plan': 'retention',
  'retention run': 'retention',
  'retention explain': 'retention',
  'retention status': 'retention',
  'pins add': 'retention',
  'pins remove': 'retention',
  'pins list': 'retention',
  'pins history': 'retention',

  // The config file of the remote CLI (profiles.ts) is the caller's own: no installation is opened.
  'profile set': 'read',
  'profile list': 'read',
  'profile remove': 'read',
};

/**
 * The commands the remote CLI runs over HTTP when a server is selected (`--server`, ALP_URL, a
 * profile; remote.ts): every artifact, lifecycle, exec, provenance, history, query and policy command,
 * and `verify ID` (the verification route). Every other command runs only where the storage is and is
 * refused (exit 2) when given a server.
 */
export const REMOTE_COMMANDS: ReadonlySet<string> = new Set([
  'artifact create',
  'artifact version',
  'artifact show',
  'artifact list',
  'artifact get',
  'artifact propose',
  'artifact withdraw',
  'artifact transition',
  'artifact approve',
  'artifact reject',
  'archive',
  'alias set',
  'alias rm',
  'alias list',
  'search',
  'audit prove',
  'exec start',
  'exec upload',
  'exec finish',
  'exec run',
  'exec show',
  'compensate',
  'history',
  'history show',
  'provenance add',
  'provenance show',
  'artifact attest',
  'keys show',
  'keys history',
  'query transitions',
  'query approvals',
  'query runs',
  'query provenance',
  'query compensations',
  'policy show',
  'policy set',
  'policy log',
  'verify',
]);

export function isRemoteCommand(cmd: Command): boolean {
  return REMOTE_COMMANDS.has(commandPath(cmd));
}

/** The command's path below the program, e.g. `artifact create`. */
export function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Fail closed: an unmapped command is an operator-only one. */
export function operationOf(cmd: Command): Operation {
  return COMMAND_OPERATIONS[commandPath(cmd)] ?? 'install';
}

/**
 * The commands that may create an installation where none is: `init`, `start` and `restore` (into a
 * new target). Every other command needs an existing one (runtime/open.ts `ifMissing: 'refuse'`).
 */
export const CREATING_COMMANDS: ReadonlySet<string> = new Set(['init', 'start', 'restore']);

export function createsInstallation(cmd: Command): boolean {
  return CREATING_COMMANDS.has(commandPath(cmd));
}
