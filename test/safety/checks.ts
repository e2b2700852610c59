/**
 * The integrity checks an operator has, run the way each entry point runs them, on either profile:
 * `alp verify --all` and `alp audit verify` (the CLI in this process), `GET /v1/artifacts/{id}/verification`
 * (the HTTP API, injected) and `alp reconcile` (the service). Used by the issue 14 safety tests to
 * show that the checks agree.
 */

import { buildServer } from '../../src/api/server.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { type ReconcileReport, reconcile } from '../../src/recovery/reconcile.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import type { Captured } from '../helpers/cli-inprocess.ts';
import { captureCli, patchCliOutput } from '../helpers/cli-inprocess.ts';
import type { TestContext } from '../helpers/context.ts';
import type { DistributedInstallation } from '../helpers/distributed.ts';

export interface Profile {
  name: string;
  ctx: ServiceContext & { clock: import('../../src/core/clock.ts').ManualClock };
  /** CLI storage arguments naming this installation. */
  storageArgs: string[];
}

export function embeddedProfile(ctx: TestContext): Profile {
  return { name: 'SQLite + directory', ctx, storageArgs: ['--data', ctx.dir] };
}

export function distributedProfile(inst: DistributedInstallation): Profile {
  // The in-process CLI reads the AWS credentials from the environment, like a child process would.
  for (const [k, v] of Object.entries(inst.env)) if (k.startsWith('AWS_')) process.env[k] = v;
  return { name: 'DynamoDB Local + s3rver', ctx: inst.ctx, storageArgs: ['--metadata', inst.metadataUrl, '--content', inst.contentUrl] };
}

let patched = false;
export async function cli(profile: Profile, args: string[]): Promise<Captured> {
  if (!patched) {
    patchCliOutput();
    patched = true;
  }
  return captureCli([...args, ...profile.storageArgs, '--json']);
}

export interface Verdicts {
  verifyAll: { code: number; report: Record<string, unknown> };
  auditVerify: { code: number; report: Record<string, unknown> };
  http: Record<string, unknown>;
  reconcile: ReconcileReport;
}

function parse(c: Captured): Record<string, unknown> {
  try {
    return JSON.parse(c.stdout) as Record<string, unknown>;
  } catch {
    throw new Error(`not JSON (exit ${c.code}): ${c.stdout} ${c.stderr}`);
  }
}

export async function httpVerification(profile: Profile, artifactId: string): Promise<Record<string, unknown>> {
  const server = await buildServer(profile.ctx, { logger: false, processMetrics: false });
  try {
    const { token } = await createToken(profile.ctx, { principal: 'checker', kind: 'service' }, { id: 'test-admin', kind: 'human' });
    const res = await server.app.inject({
      method: 'GET',
      url: `/v1/artifacts/${artifactId}/verification`,
      headers: { authorization: `Bearer ${token}` },
    });
    if (res.statusCode !== 200) throw new Error(`verification answered ${res.statusCode}: ${res.body}`);
    return res.json() as Record<string, unknown>;
  } finally {
    await server.app.close();
  }
}

export async function allChecks(profile: Profile, artifactId: string): Promise<Verdicts> {
  const v = await cli(profile, ['verify', '--all']);
  const a = await cli(profile, ['audit', 'verify']);
  return {
    verifyAll: { code: v.code, report: parse(v) },
    auditVerify: { code: a.code, report: parse(a) },
    http: await httpVerification(profile, artifactId),
    reconcile: await reconcile(profile.ctx, { actor: 'test' }),
  };
}
