/**
 * The startup sequence `alp init`, `alp serve` and `alp start` share, in its one order: prepare the
 * metadata store, check its schema version, make an embedded installation private again, create or
 * open the installation, open the telemetry outbox, record the audit counter baseline, remove
 * interrupted uploads, settle interrupted backups, repair derived provenance documents, open (or
 * create) the installation key. Also the
 * bootstrap tokens a new installation starts with. Entry points call this and render the result.
 */
import { establishAuditBaseline } from '../audit/counter.ts';
import { installationKeys, type PublicKeyView } from '../audit/installation-keys.ts';
import { describeContent, describeMetadata, type StorageConfig } from '../core/config.ts';
import { createToken, localOperator } from '../lifecycle/principals.ts';
import { repairProvenanceDocuments } from '../lifecycle/provenance.ts';
import { settleInterruptedBackups } from '../recovery/backup.ts';
import type { Tightened } from '../store/sqlite/file-modes.ts';
import type { ServiceContext } from '../system/context.ts';
import { initInstallation, markBootstrapShown } from '../system/installation.ts';
import { checkSchema } from '../system/schema.ts';
import { telemetryLimitsFromEnv } from '../telemetry/limits.ts';
import { TelemetryQueue } from '../telemetry/queue.ts';
import { tightenEmbeddedModes } from './open.ts';

export interface StartupOptions {
  /** Issue the bootstrap tokens on a new installation (`alp start`); reported as `bootstrapPending`. */
  bootstrapTokens?: boolean;
  /** Told about every path whose mode was tightened, before the installation is opened. */
  onTightened?: (t: Tightened) => void;
}

/** Makes the metadata store usable (ItemStore.prepare; DynamoDB creates the table); `alp restore` too. */
export async function prepareItems(ctx: ServiceContext): Promise<void> {
  await ctx.items.prepare();
}

/** Runs the startup sequence on an opened installation; returns what an entry point reports. */
export async function startInstallation(ctx: ServiceContext, config: StorageConfig, opts: StartupOptions = {}) {
  await prepareItems(ctx);
  await checkSchema(ctx.items); // now readable: refuse a newer layout, migrate an older one
  for (const t of tightenEmbeddedModes(config)) opts.onTightened?.(t);
  const { installation, created, bootstrapPending } = await initInstallation(
    ctx,
    opts.bootstrapTokens === undefined ? {} : { bootstrapTokens: opts.bootstrapTokens },
  );
  // The storage worker initialises the telemetry outbox (limits from ALP_TELEMETRY_*, else defaults).
  const telemetry = await new TelemetryQueue(ctx.items, telemetryLimitsFromEnv(), {
    clock: ctx.clock,
    shards: ctx.layout.telemetry_shards,
  }).open();
  // The audit append counter's baseline (issue 14 item 12), once, now that the outbox state exists.
  await establishAuditBaseline(ctx);
  const cleaned = await ctx.content.cleanupInterrupted();
  // Backups whose writer died: registered when their directory made it into place, failed otherwise.
  const backups = await settleInterruptedBackups(ctx);
  // Derived provenance documents a dead writer left behind its committed steps.
  const provenanceRepaired = await repairProvenanceDocuments(ctx);
  // The installation key exists from here on (generated on an embedded installation's first start).
  const signingKey = await openSigningKey(ctx);
  return {
    ...installation,
    created,
    bootstrapPending,
    metadata: describeMetadata(config.metadata),
    content: describeContent(config.content),
    interrupted_uploads_removed: cleaned,
    interrupted_backups: { completed: backups.completed, failed: backups.failed },
    provenance_documents_repaired: provenanceRepaired,
    telemetry_limits: telemetry,
    signing_key: signingKey,
  };
}

/**
 * Opens (an embedded installation: creates) the installation key and returns its public view; null
 * when none is configured (the distributed profile without ALP_SIGNING_KEY: signing fails where it is
 * needed). A configured key that cannot be used (missing, open to other users) fails the start.
 */
async function openSigningKey(ctx: ServiceContext): Promise<(PublicKeyView & { source: string }) | null> {
  if (!ctx.signingKey) return null;
  const [key] = (await installationKeys(ctx)).keys;
  return key ? { ...key, source: ctx.signingKey.describe } : null;
}

export type StartupStatus = Awaited<ReturnType<typeof startInstallation>>;

/** The principal of the agent token a new installation starts with. */
export const BOOTSTRAP_AGENT = 'agent';

export interface IssuedToken {
  principal: string;
  kind: string;
  token: string;
}

/**
 * On a brand-new installation only (`bootstrapPending`): one human token (the local operator) and
 * one agent token. Issued again until a start has shown them (`markBootstrapShown`): a first start
 * killed before it printed them issues new ones.
 */
export async function issueBootstrapTokens(ctx: ServiceContext): Promise<IssuedToken[]> {
  const operator = localOperator();
  const out: IssuedToken[] = [];
  for (const [principal, kind] of [
    [operator.id, 'human'],
    [BOOTSTRAP_AGENT, 'agent'],
  ] as const) {
    const { token } = await createToken(ctx, { principal, kind, label: 'created by alp start on a new installation' }, operator);
    out.push({ principal, kind, token });
  }
  return out;
}

/** Records that the bootstrap tokens were shown, so the next start issues none. */
export async function bootstrapTokensShown(ctx: ServiceContext): Promise<void> {
  await markBootstrapShown(ctx);
}
