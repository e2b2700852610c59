/**
 * A small installation with something in every view, made through the public HTTP API only (as agents
 * and humans would): a proposed migration whose provenance links to another artifact, a rejected first
 * version to diff against, an executed script with logs and output, a failed run compensated by a
 * rollback, an archived artifact, a run with a large stdout.log, and enough drafts to paginate.
 */
import { createHash } from 'node:crypto';

export interface SeedTokens {
  human: string;
  agent: string;
}

export interface Seeded {
  /** PROPOSED v2 awaiting a human; its provenance names schema.sql v1 and its own v1. */
  migration: { id: string; name: string; v1: string; v2: string };
  schema: { id: string; name: string; digest: string };
  report: { id: string; digest: string };
  deploy: { id: string; runFailed: string; runOk: string; compensationId: string };
  archived: { id: string };
  bigLog: { id: string; run: string; size: number; digest: string; lastLine: string };
  drafts: number;
}

/** The last line of the failed deploy run's stderr.log (after 120 lines of retries). */
export const FAILED_LAST_LINE = 'error: deployment "api" exceeded its progress deadline';

const sha = (b: Uint8Array | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export async function seed(url: string, tokens: SeedTokens, opts: { bigLogBytes?: number; drafts?: number } = {}): Promise<Seeded> {
  const call = async (token: string, method: string, path: string, body?: unknown, raw?: Uint8Array | string) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    let payload: RequestInit['body'];
    if (raw !== undefined) {
      headers['content-type'] = 'application/octet-stream';
      payload = raw as RequestInit['body'];
    } else if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    const res = await fetch(`${url}${path}`, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`seed: ${method} ${path} answered ${res.status}: ${text.slice(0, 400)}`);
    return text ? JSON.parse(text) : undefined;
  };
  const agent = (method: string, path: string, body?: unknown, raw?: Uint8Array | string) => call(tokens.agent, method, path, body, raw);
  const human = (method: string, path: string, body?: unknown) => call(tokens.human, method, path, body);
  const create = async (name: string, filename: string, kind: string, content: string, extra = '') =>
    (await agent(
      'POST',
      `/v1/artifacts?name=${encodeURIComponent(name)}&filename=${encodeURIComponent(filename)}&kind=${kind}${extra}`,
      undefined,
      content,
    )) as { artifact_id: string; content_hash: string };
  const propose = (id: string, v: number) => agent('POST', `/v1/artifacts/${id}/versions/${v}/transitions`, { to: 'PROPOSED' });
  const approve = (id: string, v: number, evidence: string) =>
    human('POST', `/v1/artifacts/${id}/versions/${v}/approvals`, { decision: 'APPROVE', evidence_ref: evidence, expires_in: '30d' });
  const reject = (id: string, v: number, evidence: string, comment: string) =>
    human('POST', `/v1/artifacts/${id}/versions/${v}/approvals`, { decision: 'REJECT', evidence_ref: evidence, comment });
  const run = async (id: string, v: number, status: 'SUCCEEDED' | 'FAILED', outputs: Record<string, string | Uint8Array>) => {
    const started = (await agent('POST', `/v1/artifacts/${id}/versions/${v}/executions`)) as { run_id: string };
    for (const [name, bytes] of Object.entries(outputs)) await agent('PUT', `/v1/executions/${started.run_id}/${name}`, undefined, bytes);
    await agent('POST', `/v1/executions/${started.run_id}/finish`, { status, exit_code: status === 'SUCCEEDED' ? 0 : 3 });
    return started.run_id;
  };

  // An input other artifacts are made from.
  const schemaText = [
    'CREATE TABLE users (',
    '  id BIGINT PRIMARY KEY,',
    '  email TEXT NOT NULL,',
    '  created_at TIMESTAMPTZ NOT NULL',
    ');',
    '',
  ].join('\n');
  const schema = await create('schema.sql', 'schema.sql', 'config', schemaText, '&label=team=data');
  await propose(schema.artifact_id, 1);
  await approve(schema.artifact_id, 1, 'CR-100');
  await run(schema.artifact_id, 1, 'SUCCEEDED', {
    'stdout.log': 'applying schema.sql\nCREATE TABLE\ndone in 41 ms\n',
    'output.json': JSON.stringify({ tables: ['users'], ok: true }),
  });

  // The migration: v1 rejected, v2 generated from schema.sql and v1, proposed for a human.
  const lines = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i));
  const v1Text = [
    '-- migrate users: add a display name',
    'BEGIN;',
    'ALTER TABLE users ADD COLUMN display_name TEXT;',
    ...lines(30, (i) => `UPDATE users SET display_name = email WHERE id % 30 = ${i};`),
    'COMMIT;',
    '',
  ].join('\n');
  const v2Text = [
    '-- migrate users: add a display name (batched, with a default)',
    'BEGIN;',
    "ALTER TABLE users ADD COLUMN display_name TEXT NOT NULL DEFAULT '';",
    ...lines(30, (i) =>
      i % 10 === 4 ? `-- batch ${i} runs in the second window` : `UPDATE users SET display_name = email WHERE id % 30 = ${i};`,
    ),
    'CREATE INDEX users_display_name ON users (display_name);',
    'COMMIT;',
    '',
  ].join('\n');
  const m1 = await create('migrate-users', 'migrate.sql', 'migration', v1Text, '&label=team=data&label=risk=medium');
  const mid = m1.artifact_id;
  await propose(mid, 1);
  await reject(mid, 1, 'REVIEW-7', 'needs a default and an index');
  await agent('POST', `/v1/artifacts/${mid}/provenance`, {
    action: 'generate',
    actor: 'model-x',
    model: 'model-x-2026-01',
    tool: 'alp-agent 0.3',
    inputs: [schema.content_hash],
    outputs: [m1.content_hash],
    note: 'first draft from the schema',
  });
  const m2 = (await agent('POST', `/v1/artifacts/${mid}/versions?filename=migrate.sql`, undefined, v2Text)) as { content_hash: string };
  await agent('POST', `/v1/artifacts/${mid}/provenance`, {
    action: 'revise',
    actor: 'model-x',
    model: 'model-x-2026-01',
    inputs: [m1.content_hash, schema.content_hash],
    outputs: [m2.content_hash],
    note: 'addresses REVIEW-7',
  });
  const reportText = 'lint: migrate.sql v2\n0 errors, 1 warning: the index build locks users briefly\n';
  const report = await create('migrate-users lint report', 'lint.txt', 'report', reportText);
  await agent('POST', `/v1/artifacts/${mid}/provenance`, {
    action: 'lint',
    tool: 'sqlfluff 3',
    inputs: [m2.content_hash],
    outputs: [report.content_hash],
  });
  await propose(mid, 2);
  // Two approvals of v2 recorded but not counted: one binds v1's digest, one had expired when given.
  await human('POST', `/v1/artifacts/${mid}/versions/2/approvals`, {
    decision: 'APPROVE',
    evidence_ref: 'WRONG-DIGEST',
    content_hash: m1.content_hash,
    expires_in: '30d',
  });
  await human('POST', `/v1/artifacts/${mid}/versions/2/approvals`, {
    decision: 'APPROVE',
    evidence_ref: 'EXPIRED-1',
    expires_at: '2020-01-01T00:00:00.000Z',
  });

  // A deploy script: v1 failed and was compensated by a rollback; v2 ran.
  const deploy = await create('deploy-api', 'deploy.sh', 'script', '#!/bin/sh\nset -e\nkubectl apply -f api.yaml\n');
  const did = deploy.artifact_id;
  await propose(did, 1);
  await approve(did, 1, 'CHG-2001');
  const runFailed = await run(did, 1, 'FAILED', {
    'stdout.log': 'deployment.apps/api configured\nwaiting for rollout\n',
    'stderr.log': `${lines(120, (i) => `retry ${i + 1}: waiting for deployment "api" rollout`).join('\n')}\n${FAILED_LAST_LINE}\n`,
  });
  const comp = (await agent(
    'POST',
    `/v1/artifacts/${did}/versions/1/compensations?filename=rollback.sh&reason=${encodeURIComponent('rollout stuck')}`,
    undefined,
    '#!/bin/sh\nkubectl rollout undo deployment/api\n',
  )) as { compensation: { artifact_id: string } };
  const cid = comp.compensation.artifact_id;
  await propose(cid, 1);
  await approve(cid, 1, 'CHG-2002');
  await run(cid, 1, 'SUCCEEDED', { 'stdout.log': 'deployment.apps/api rolled back\n' });
  await agent(
    'POST',
    `/v1/artifacts/${did}/versions?filename=deploy.sh`,
    undefined,
    '#!/bin/sh\nset -e\nkubectl apply -f api.yaml --timeout=10m\n',
  );
  await propose(did, 2);
  await approve(did, 2, 'CHG-2003');
  const runOk = await run(did, 2, 'SUCCEEDED', {
    'stdout.log': 'deployment.apps/api configured\nrollout complete\n',
    'output.json': JSON.stringify({ replicas: 3, image: 'api:1.4.2' }),
  });

  // An archived artifact (rejected, then archived by a human).
  const old = await create('q1 cost report', 'cost.csv', 'report', 'month,eur\njan,1200\nfeb,1350\nmar,1100\n');
  await propose(old.artifact_id, 1);
  await reject(old.artifact_id, 1, 'FIN-9', 'superseded by the finance export');
  await human('POST', `/v1/artifacts/${old.artifact_id}/archive`);

  // A nightly job whose stdout.log is large.
  const size = opts.bigLogBytes ?? 50 * 1024 * 1024;
  const big = Buffer.alloc(size);
  let off = 0;
  let n = 0;
  for (;;) {
    const line = `${String(n).padStart(8, '0')} ${new Date(Date.UTC(2026, 0, 1, 2) + n * 10).toISOString()} INFO backup: copied chunk ${n} of the nightly set\n`;
    if (off + Buffer.byteLength(line) + 64 > size) break;
    off += big.write(line, off, 'utf8');
    n++;
  }
  const lastLine = `END of log after ${n} lines`;
  big.write(`${lastLine}${'.'.repeat(size - off - lastLine.length - 1)}\n`, off, 'utf8');
  const nightly = await create('nightly-backup', 'backup.sh', 'script', '#!/bin/sh\nrestic backup /srv\n');
  await propose(nightly.artifact_id, 1);
  await approve(nightly.artifact_id, 1, 'OPS-NIGHTLY');
  const bigRun = await run(nightly.artifact_id, 1, 'SUCCEEDED', {
    'stdout.log': big,
    'stderr.log': 'warning: 2 files changed while reading\n',
  });

  // Drafts, enough for more than one page.
  const drafts = opts.drafts ?? 25;
  for (let i = 1; i <= drafts; i++) await create(`note-${String(i).padStart(2, '0')}`, 'note.md', 'note', `# note ${i}\n\nscratch\n`);

  return {
    migration: { id: mid, name: 'migrate-users', v1: m1.content_hash, v2: m2.content_hash },
    schema: { id: schema.artifact_id, name: 'schema.sql', digest: schema.content_hash },
    report: { id: report.artifact_id, digest: report.content_hash },
    deploy: { id: did, runFailed, runOk, compensationId: cid },
    archived: { id: old.artifact_id },
    bigLog: { id: nightly.artifact_id, run: bigRun, size, digest: sha(big), lastLine },
    drafts,
  };
}
