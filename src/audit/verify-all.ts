/**
 * `alp audit verify` as one service call: every chain (or one), the installation-wide append counter
 * (all chains only) and, when given, a checkpoint the chains must still extend. Entry points parse
 * and render; the rule of what is checked, in which order, and what counts as broken lives here.
 */
import type { ServiceContext } from '../system/context.ts';
import { stateKey } from '../telemetry/queue.ts';
import { verifyApprovalPolicyLog } from './approval-policy-log.ts';
import { allHeads } from './chain.ts';
import { type Checkpoint, type CounterCheck, checkAuditCounter, verifyCheckpoint } from './counter.ts';
import { verifyKeyLog } from './key-log.ts';
import type { NoteVerifier } from './tlog/note.ts';
import { checkLogState, type LogCheckpointReport, type LogSelfCheck, verifyLogCheckpoint } from './tlog/verify.ts';
import { verifyTokenLog } from './token-log.ts';
import { type ChainReport, verifyArtifactAudit } from './verify.ts';
import { verifyWebhookLog } from './webhook-log.ts';

export interface AuditVerifySummary {
  /** Chains verified. */
  artifacts: number;
  /** Entries across every verified chain. */
  entries: number;
  ok: boolean;
  /** Every report with a finding: broken chains, a counter mismatch (`*`), checkpoint findings. */
  broken: ChainReport[];
  /** The append counter check, when every chain was verified. */
  counter?: CounterCheck;
  /** The transparency log's self-check (tiles' root = STATE's), when every chain was verified. */
  log_state?: LogSelfCheck;
  /** The signed checkpoint check (tlog/verify.ts), when one was given. */
  log?: LogCheckpointReport;
  /** The token log (token-log.ts), when every chain was verified: its entries (counted apart from `entries`). */
  token_log?: { entries: number; ok: boolean };
  /** The webhook endpoint log (webhook-log.ts), likewise. */
  webhook_log?: { entries: number; ok: boolean };
  /** The approval policy log (approval-policy-log.ts), likewise. */
  approval_policy_log?: { entries: number; ok: boolean };
  /** The installation key log (key-log.ts: chain, signatures, cross-signatures, CURRENT), likewise. */
  key_log?: { entries: number; ok: boolean };
}

export interface AuditVerifyOptions {
  /** One artifact only (no counter check); else every chain. */
  artifactId?: string | undefined;
  /** Also prove every chain still extends this checkpoint. */
  checkpoint?: Checkpoint | undefined;
  /** Also hold the installation to this signed transparency-log checkpoint, under the pinned key. */
  logCheckpoint?: { note: string; verifier: NoteVerifier } | undefined;
  /** Called once with the number of chains, then once per chain verified. */
  progress?: { total?(n: number): void; tick?(n: number): void };
}

/** The chains to verify: the one named, else every artifact with a HEAD. */
async function chainIds(ctx: ServiceContext, artifactId: string | undefined): Promise<string[]> {
  if (artifactId) return [artifactId];
  const ids: string[] = [];
  for await (const h of allHeads(ctx)) ids.push(h.artifact_id);
  return ids;
}

function outsideChain(artifactId: string, row: string, problem: string): ChainReport {
  return { artifact_id: artifactId, entries: 0, ok: false, findings: [{ artifact_id: artifactId, row, problem }] };
}

export async function verifyAllAudit(ctx: ServiceContext, opts: AuditVerifyOptions = {}): Promise<AuditVerifySummary> {
  const ids = await chainIds(ctx, opts.artifactId);
  opts.progress?.total?.(ids.length);
  const reports: ChainReport[] = [];
  for (const a of ids) {
    reports.push(await verifyArtifactAudit(ctx, a));
    opts.progress?.tick?.(1);
  }
  // Truncation evidence outside the chains: the append counter (all chains) and a checkpoint.
  const counter = opts.artifactId ? undefined : await checkAuditCounter(ctx);
  if (counter && !counter.ok) reports.push(outsideChain('*', `${stateKey.PK} ${stateKey.SK}`, counter.detail));
  const tokenLog = opts.artifactId ? undefined : await verifyTokenLog(ctx);
  if (tokenLog && !tokenLog.ok) reports.push(tokenLog);
  const webhookLog = opts.artifactId ? undefined : await verifyWebhookLog(ctx);
  if (webhookLog && !webhookLog.ok) reports.push(webhookLog);
  const policyLog = opts.artifactId ? undefined : await verifyApprovalPolicyLog(ctx);
  if (policyLog && !policyLog.ok) reports.push(policyLog);
  const keyLog = opts.artifactId ? undefined : await verifyKeyLog(ctx);
  if (keyLog && !keyLog.ok) reports.push(keyLog);
  if (opts.checkpoint)
    for (const f of await verifyCheckpoint(ctx, opts.checkpoint))
      reports.push(outsideChain(f.artifact_id, `checkpoint ${f.artifact_id}`, f.problem));
  // The transparency log: self-consistent (all chains), and extending a signed checkpoint when given one.
  const logState = opts.artifactId ? undefined : await checkLogState(ctx);
  if (logState && !logState.ok) reports.push(outsideChain('*', 'TLOG STATE', logState.detail));
  const log = opts.logCheckpoint ? await verifyLogCheckpoint(ctx, opts.logCheckpoint.note, opts.logCheckpoint.verifier) : undefined;
  for (const f of log?.findings ?? []) reports.push(outsideChain('*', f.row, f.problem));
  const broken = reports.filter((r) => !r.ok);
  return {
    artifacts: ids.length,
    entries: reports.reduce((n, r) => n + r.entries, 0),
    ok: broken.length === 0,
    broken,
    ...(counter ? { counter } : {}),
    ...(logState ? { log_state: logState } : {}),
    ...(log ? { log } : {}),
    ...(tokenLog ? { token_log: { entries: tokenLog.entries, ok: tokenLog.ok } } : {}),
    ...(webhookLog ? { webhook_log: { entries: webhookLog.entries, ok: webhookLog.ok } } : {}),
    ...(policyLog ? { approval_policy_log: { entries: policyLog.entries, ok: policyLog.ok } } : {}),
    ...(keyLog ? { key_log: { entries: keyLog.entries, ok: keyLog.ok } } : {}),
  };
}
