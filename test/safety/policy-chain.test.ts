/**
 * Issue 14 item 11: the fields that decide outcomes (quorum, kind, labels, name) are bound into the
 * audit chain. An edit of the HEAD row made directly in the database (SQLite: the row's JSON;
 * DynamoDB Local: an UpdateItem outside ALP) is named by `alp audit verify`, `alp verify --all`, the
 * verification route and reconcile, and an approval that would reach APPROVED on the edited quorum
 * is refused.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { readHead } from '../../src/audit/chain.ts';
import { IntegrityError } from '../../src/core/errors.ts';
import { HEAD_SK } from '../../src/core/keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { embeddedContext, type TestContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { allChecks, distributedProfile, embeddedProfile, type Profile } from './checks.ts';

after(stopDistributedServers);

type Edit = (id: string, set: Record<string, unknown>) => Promise<void>;

/** SQLite: the HEAD row's JSON edited with a separate connection, as a person with the file would. */
function sqliteEdit(ctx: TestContext): Edit {
  return async (id, set) => {
    const db = new Database(ctx.dbPath);
    try {
      const row = db.prepare('SELECT attrs FROM items WHERE PK = ? AND SK = ?').get(`ART#${id}`, HEAD_SK) as { attrs: string };
      const attrs = { ...(JSON.parse(row.attrs) as Record<string, unknown>), ...set };
      db.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?').run(JSON.stringify(attrs), `ART#${id}`, HEAD_SK);
    } finally {
      db.close();
    }
  };
}

const profiles: Array<[string, () => Promise<{ p: Profile; edit: Edit }>]> = [
  [
    'SQLite + directory',
    async () => {
      const ctx = await embeddedContext();
      return { p: embeddedProfile(ctx), edit: sqliteEdit(ctx) };
    },
  ],
  [
    'DynamoDB Local + s3rver',
    async () => {
      const inst = await distributedInstallation();
      // An UpdateItem on the table, outside every ALP rule.
      const edit: Edit = async (id, set) => {
        await inst.ctx.items.update({ PK: `ART#${id}`, SK: HEAD_SK }, { set });
      };
      return { p: distributedProfile(inst), edit };
    },
  ],
];

const edits: Array<[string, Record<string, unknown>]> = [
  ['quorum', { quorum: 1 }],
  ['labels', { labels: { env: 'dev' } }],
  ['kind', { kind: 'report' }],
  ['name', { name: 'harmless' }],
];

for (const [profile, open] of profiles) {
  describe(`issue 14 item 11: policy outside the chain (${profile})`, () => {
    it('issue 14 item 11: a HEAD edit of quorum, labels, kind or name is named by audit verify, verify --all, the verification route and reconcile; the approval on the edited quorum is refused', async () => {
      const { p, edit } = await open();
      await initInstallation(p.ctx);
      const { head, version } = await createArtifact(p.ctx, agent, {
        name: 'migrate',
        kind: 'migration',
        labels: { env: 'prod' },
        quorum: 2,
        filename: 'm.sql',
        body: bytesOf('drop table x;\n'),
      });
      const id = version.artifact_id;
      await propose(p.ctx, agent, id, 1);
      const original = { quorum: head.quorum, labels: head.labels, kind: head.kind, name: head.name };
      const clean = await allChecks(p, id);
      assert.equal(clean.auditVerify.code, 0, JSON.stringify(clean.auditVerify.report));
      assert.equal(clean.verifyAll.code, 0, JSON.stringify(clean.verifyAll.report));

      for (const [field, set] of edits) {
        await edit(id, set);
        const c = await allChecks(p, id);
        const names = (s: string) => s.includes(`${field} `);
        assert.equal(c.auditVerify.code, 5, `audit verify after editing ${field}`);
        const broken = (c.auditVerify.report.broken as Array<{ findings: Array<{ problem: string }> }>).flatMap((b) => b.findings);
        assert.ok(
          broken.some((f) => f.problem.startsWith('HEAD') && names(f.problem)),
          `audit verify names ${field}: ${JSON.stringify(broken)}`,
        );
        assert.equal(c.verifyAll.code, 5, `verify --all after editing ${field}`);
        const found = c.verifyAll.report.findings as Array<{ problem: string; detail: string }>;
        assert.ok(
          found.some((f) => f.problem === 'policy' && names(f.detail)),
          `verify --all names ${field}: ${JSON.stringify(found)}`,
        );
        assert.equal(c.http.ok, false, `verification route after editing ${field}`);
        assert.equal(c.reconcile.status, 'FAILED', `reconcile after editing ${field}`);
        assert.ok(c.reconcile.findings.some((f) => f.kind === 'audit' && names(f.detail)));

        if (field === 'quorum') {
          // One approval would reach the edited quorum of 1: refused, nothing recorded.
          const refused = await decide(p.ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1' }).then(
            () => undefined,
            (e: unknown) => e,
          );
          assert.ok(refused instanceof IntegrityError, `the approval is refused: ${String(refused)}`);
          assert.match(refused.message, /quorum 1 differs from 2/);
          assert.equal((await readVersion(p.ctx.items, id, 1)).state, 'PROPOSED');
        }
        await edit(id, original);
      }
      const restored = await allChecks(p, id);
      assert.equal(restored.auditVerify.code, 0, JSON.stringify(restored.auditVerify.report));
      assert.equal(restored.reconcile.status, 'VERIFIED', JSON.stringify(restored.reconcile.findings.slice(0, 3)));
      assert.equal((await readHead(p.ctx, id)).quorum, 2);
    });
  });
}
