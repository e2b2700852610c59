/**
 * `alp lifecycle status` reads instead of computing (issue 16 item 10), on both profiles: each
 * object's class is what the storage says (S3 HeadObject StorageClass; s3rver answers with the class
 * the object was written with) or, where the storage says nothing (fs), what the rules would do —
 * evaluated as S3 does (executions/ at 30 days, not the RFC's 14; nothing under 128 KiB moves) —
 * and every figure names its source. `--objects` lists the archive copies of execution outputs.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DAY_MS } from '../../src/core/clock.ts';
import { archiveKey } from '../../src/core/object-keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { createArtifact, showArtifact } from '../../src/lifecycle/artifacts.ts';
import { finishExecution, listExecutions, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import { plannedRules } from '../../src/lifecycle/storage-rules.ts';
import { type ObjectClass, ruleClass, storageStatus } from '../../src/lifecycle/storage-status.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';

after(stopDistributedServers);

const KIB = 1024;

describe('rules evaluated as S3 applies them', () => {
  const { rules } = plannedRules();
  it('executions/ moves at the 30 days of the rule installed, not the RFC 14', () => {
    assert.equal(ruleClass(rules, 'executions/r/stdout.log', 20, 200 * KIB), 'STANDARD');
    assert.equal(ruleClass(rules, 'executions/r/stdout.log', 30, 200 * KIB), 'STANDARD_IA');
    assert.equal(ruleClass(rules, 'artifacts/a/v1/f', 29, 200 * KIB), 'STANDARD');
    assert.equal(ruleClass(rules, 'artifacts/a/v1/f', 30, 200 * KIB), 'STANDARD_IA');
  });
  it('objects under 128 KiB (or of unknown size) never move; provenance never; archive is written GLACIER', () => {
    assert.equal(ruleClass(rules, 'executions/r/stdout.log', 400, 128 * KIB - 1), 'STANDARD');
    assert.equal(ruleClass(rules, 'executions/r/stdout.log', 400, 128 * KIB), 'STANDARD_IA');
    assert.equal(ruleClass(rules, 'artifacts/a/v1/f', 400, undefined), 'STANDARD');
    assert.equal(ruleClass(rules, 'provenance/a.json', 4000, 10 * 1024 * KIB), 'STANDARD');
    assert.equal(ruleClass(rules, 'archive/2026/03/a/v1/f', 0, 10), 'GLACIER');
  });
  it('with no rules in force nothing moves', () => {
    assert.equal(ruleClass([], 'executions/r/stdout.log', 400, 200 * KIB), 'STANDARD');
  });
});

/** An artifact with one large and one small output, run, settled and archived. */
async function archivedRun(ctx: ServiceContext) {
  const { version } = await createArtifact(ctx, agent, { name: 'big', filename: 'f.bin', body: bytesOf('x'.repeat(200 * KIB)) });
  const id = version.artifact_id;
  await propose(ctx, agent, id, 1);
  await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1' });
  const run = await startExecution(ctx, agent, id, 1);
  const big = await uploadOutput(ctx, agent, run.run_id, 'stdout.log', bytesOf('l'.repeat(200 * KIB)));
  const small = await uploadOutput(ctx, agent, run.run_id, 'output.json', bytesOf('{"ok":true}'));
  await finishExecution(ctx, agent, run.run_id, { status: 'SUCCEEDED', exitCode: 0 });
  await archiveArtifact(ctx, alice, id);
  return { id, big, small };
}

function byKey(objects: ObjectClass[] | undefined, key: string): ObjectClass {
  const o = objects?.find((x) => x.key === key);
  assert.ok(o, `status lists ${key}`);
  return o;
}

function statusSuite(
  name: string,
  open: () => Promise<{ ctx: ServiceContext & { clock: { advance(ms: number): unknown } }; close(): Promise<void> }>,
) {
  describe(`alp lifecycle status (${name})`, () => {
    it('labels every figure, lists the archive copies of execution outputs, and evaluates the rules as S3 does', async () => {
      const { ctx, close } = await open();
      try {
        const { id, big, small } = await archivedRun(ctx);
        const { head } = await showArtifact(ctx, id);
        const at = new Date(head.archived?.at as string);
        ctx.clock.advance(20 * DAY_MS);
        let status = await storageStatus(ctx, { objects: true });
        const execs = await listExecutions(ctx, id);
        const outputs = execs.flatMap((e) => Object.values(e.outputs));
        assert.equal(outputs.length, 2);
        for (const o of outputs) {
          const copy = byKey(status.objects, archiveKey(at, id, o.key));
          assert.equal(copy.by_rules, 'GLACIER');
          assert.match(copy.storage_class, /^GLACIER/);
        }
        const stdout = byKey(status.objects, big.key);
        assert.equal(stdout.rfc, 'STANDARD_IA', 'the RFC counts it IA at 14 days');
        assert.equal(stdout.by_rules, 'STANDARD', 'the rule in S3 moves it at 30');
        assert.equal(stdout.size, 200 * KIB);
        ctx.clock.advance(11 * DAY_MS);
        status = await storageStatus(ctx, { objects: true });
        assert.equal(byKey(status.objects, big.key).by_rules, 'STANDARD_IA');
        assert.equal(byKey(status.objects, small.key).by_rules, 'STANDARD', 'under 128 KiB: S3 does not move it');
        assert.equal(byKey(status.objects, small.key).rfc, 'STANDARD_IA');
        const total = status.objects?.length ?? 0;
        assert.equal(
          Object.values(status.sources).reduce((a, b) => a + b, 0),
          total,
        );
        if (ctx.content.hasStorageClasses) {
          // The storage answers for every object: that is the figure, labelled `storage`; s3rver runs
          // no lifecycle, so what it says is the class each object was written with.
          assert.deepEqual(status.sources, { storage: total });
          assert.equal(byKey(status.objects, big.key).storage_class, 'STANDARD');
          assert.equal(byKey(status.objects, big.key).source, 'storage');
          assert.ok(status.rules_error, 's3rver has no lifecycle API: the planned rules are evaluated, and it says why');
          assert.equal(status.rules_evaluated, 'planned');
        } else {
          assert.deepEqual(status.sources, { planned_rules: total });
          assert.equal(byKey(status.objects, big.key).storage_class, 'STANDARD_IA');
          assert.equal(byKey(status.objects, small.key).storage_class, 'STANDARD');
        }
      } finally {
        await close();
      }
    });
  });
}

describe('the rules actually installed are what is evaluated', () => {
  it('a bucket whose executions/ rule says 60 days moves nothing at 31, labelled rules_in_force, and is reported out of sync', async () => {
    const ctx = await embeddedContext();
    // A model of an S3 endpoint with lifecycle configuration whose HeadObject answers nothing
    // (s3rver has no lifecycle API, so this path cannot be shown against it).
    const inForce = [{ id: 'alp-executions', prefix: 'executions/', transitions: [{ days: 60, storageClass: 'STANDARD_IA' as const }] }];
    const content = new Proxy(ctx.content, {
      get(target, prop, receiver) {
        if (prop === 'getLifecycleRules') return async () => inForce;
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const modelled = Object.assign(Object.create(Object.getPrototypeOf(ctx)) as typeof ctx, ctx, { content });
    try {
      const { id, big } = await archivedRun(modelled);
      const contentKey = (await showArtifact(ctx, id)).versions[0]?.content_key as string;
      ctx.clock.advance(31 * DAY_MS);
      let status = await storageStatus(modelled, { objects: true });
      assert.equal(status.rules_evaluated, 'in_force');
      assert.equal(status.in_sync, false);
      assert.deepEqual(status.rules_in_force, inForce);
      assert.deepEqual(Object.keys(status.sources), ['rules_in_force']);
      const o = byKey(status.objects, big.key);
      assert.equal(o.by_rules, 'STANDARD', 'the installed rule says 60 days');
      assert.equal(o.source, 'rules_in_force');
      ctx.clock.advance(30 * DAY_MS);
      status = await storageStatus(modelled, { objects: true });
      assert.equal(byKey(status.objects, big.key).by_rules, 'STANDARD_IA');
      assert.equal(byKey(status.objects, big.key).storage_class, 'STANDARD_IA');
      assert.equal(byKey(status.objects, contentKey).by_rules, 'STANDARD', 'no artifacts/ rule is installed: it does not move');
    } finally {
      await ctx.items.close();
    }
  });
});

statusSuite('sqlite + fs', async () => {
  const ctx = await embeddedContext();
  return { ctx, close: async () => ctx.items.close() };
});

statusSuite('dynamodb + s3rver', async () => {
  const inst = await distributedInstallation();
  return { ctx: inst.ctx, close: () => inst.close() };
});
