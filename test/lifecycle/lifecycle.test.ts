import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { history } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { AlpError, Conflict, Forbidden, IllegalTransition } from '../../src/core/errors.ts';
import { decide, listApprovals } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact, openVersionContent, showArtifact } from '../../src/lifecycle/artifacts.ts';
import { finishExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import { buildProvenanceDocument, inTotoStatement } from '../../src/lifecycle/provenance.ts';
import { findMove, MOVES, VERSION_STATES } from '../../src/lifecycle/state-machine.ts';
import { propose, transition } from '../../src/lifecycle/transitions.ts';
import { collectRefs, verifyObjects } from '../../src/lifecycle/verify-content.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';
import { agent, alice, bob, walkEveryState } from '../helpers/walk.ts';

describe('the lifecycle of DESIGN §5', () => {
  it('walks one artifact through every state; the audit chains and the content stay intact', async () => {
    const ctx = await embeddedContext();
    const seen = new Set<string>();
    const { id, compensations } = await walkEveryState(ctx, (s) => seen.add(s));
    assert.deepEqual([...seen].sort(), [...VERSION_STATES].sort());
    const { versions, head } = await showArtifact(ctx, id);
    assert.deepEqual(
      versions.map((v) => v.state),
      ['ARCHIVED', 'ARCHIVED', 'ARCHIVED', 'ARCHIVED'],
    );
    assert.ok(head.archived);
    for (const a of [id, ...compensations]) {
      const report = await verifyArtifactAudit(ctx, a);
      assert.deepEqual(report.findings, [], a);
    }
    const transitions = (await history(ctx, id)).filter((e) => e.type === 'transition');
    for (const t of transitions) {
      if (t.from !== null) assert.ok(findMove(t.from as never, t.to as never), `${String(t.from)} → ${String(t.to)} is in the table`);
    }
    const v2 = transitions.filter((t) => t.version === 2).map((t) => t.to);
    assert.deepEqual(v2, ['DRAFT', 'PROPOSED', 'APPROVED', 'EXECUTING', 'FAILED', 'COMPENSATING', 'COMPENSATED', 'ARCHIVED']);
    const v4 = transitions.filter((t) => t.version === 4).map((t) => t.to);
    assert.deepEqual(v4, ['DRAFT', 'PROPOSED', 'APPROVED', 'EXECUTING', 'EXECUTED', 'COMPENSATING', 'EXECUTED', 'ARCHIVED']);
    // Archived content is read from its verified archive copy; originals remain.
    const read = await openVersionContent(ctx, id, 4);
    assert.match(read.version.archive_key as string, /^archive\/\d{4}\/\d{2}\//);
    assert.equal((await collect(read.stream)).toString(), 'echo 4\n');
    const objects = await verifyObjects(ctx, await collectRefs(ctx));
    assert.deepEqual(objects.findings, []);
    assert.ok(objects.objects > 20);
  });

  it('refuses every (state, target) pair outside the table with exit 4 and changes nothing', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'table', filename: 'f', body: bytesOf('x') });
    const key = { PK: version.PK, SK: version.SK };
    let checked = 0;
    for (const from of VERSION_STATES) {
      await ctx.items.update(key, { set: { state: from, GSI1PK: `STATE#${from}` } });
      for (const to of VERSION_STATES) {
        if (findMove(from, to)) continue;
        const before = (await ctx.items.scan()).items;
        const err = await transition(ctx, alice, version.artifact_id, 1, to).then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(err instanceof AlpError, `${from} → ${to} must be refused`);
        assert.equal(err.exitCode, 4, `${from} → ${to}: ${err.message}`);
        assert.deepEqual((await ctx.items.scan()).items, before, `${from} → ${to} changed nothing`);
        checked++;
      }
    }
    assert.equal(checked, VERSION_STATES.length ** 2 - MOVES.length);
  });

  it('moves that belong to an operation cannot be forced through transition --to', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('x') });
    await propose(ctx, agent, version.artifact_id, 1);
    await assert.rejects(transition(ctx, alice, version.artifact_id, 1, 'APPROVED'), IllegalTransition);
    await assert.rejects(transition(ctx, alice, version.artifact_id, 1, 'REJECTED'), IllegalTransition);
    await assert.rejects(transition(ctx, alice, version.artifact_id, 1, 'SUPERSEDED'), IllegalTransition);
    assert.equal((await readVersion(ctx.items, version.artifact_id, 1)).state, 'PROPOSED');
  });

  it('proposing version n supersedes earlier open versions in the same transaction', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1') });
    const id = version.artifact_id;
    await propose(ctx, agent, id, 1);
    await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
    await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf('2') });
    await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf('3') });
    await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf('4') });
    await propose(ctx, agent, id, 3);
    const states = (await showArtifact(ctx, id)).versions.map((v) => v.state);
    assert.deepEqual(states, ['SUPERSEDED', 'SUPERSEDED', 'PROPOSED', 'DRAFT']);
    const h = await history(ctx, id);
    const last = h.slice(-3);
    assert.equal(new Set(last.map((e) => e.timestamp)).size, 1, 'one transaction, one timestamp');
  });
});

describe('approvals', () => {
  it('only humans approve or reject', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1') });
    await propose(ctx, agent, version.artifact_id, 1);
    await assert.rejects(decide(ctx, agent, version.artifact_id, 1, { decision: 'APPROVE', evidenceRef: 'e' }), Forbidden);
    await assert.rejects(
      decide(ctx, { id: 'svc', kind: 'service' }, version.artifact_id, 1, { decision: 'REJECT', evidenceRef: 'e' }),
      Forbidden,
    );
    assert.equal((await readVersion(ctx.items, version.artifact_id, 1)).state, 'PROPOSED');
  });

  it('a quorum of distinct humans approves; a wrong hash, an expired approval or a second one by the same principal does not count', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1'), quorum: 2 });
    const id = version.artifact_id;
    await propose(ctx, agent, id, 1);
    const wrong = await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'e', contentHash: sha256('something else') });
    assert.equal(wrong.approval.counted, false);
    assert.match(wrong.approval.not_counted_reason as string, /binds/);
    const expired = await decide(ctx, alice, id, 1, {
      decision: 'APPROVE',
      evidenceRef: 'e',
      expiresAt: new Date(ctx.clock.now().getTime() - 1000).toISOString(),
    });
    assert.equal(expired.approval.counted, false);
    const first = await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
    assert.equal(first.approval.counted, true);
    assert.equal(first.version.state, 'PROPOSED');
    const twice = await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'e2' });
    assert.equal(twice.approval.counted, false);
    assert.equal(twice.version.state, 'PROPOSED', 'the same principal twice is not a quorum of 2');
    const second = await decide(ctx, bob, id, 1, { decision: 'APPROVE', evidenceRef: 'e3' });
    assert.equal(second.version.state, 'APPROVED');
    assert.equal((await listApprovals(ctx, id)).length, 5);
  });

  it('a rejection moves the version to REJECTED', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1'), quorum: 2 });
    await propose(ctx, agent, version.artifact_id, 1);
    await decide(ctx, alice, version.artifact_id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
    const r = await decide(ctx, bob, version.artifact_id, 1, { decision: 'REJECT', evidenceRef: 'looks wrong' });
    assert.equal(r.version.state, 'REJECTED');
  });

  it('withdrawing and proposing again starts a new round: earlier approvals no longer count', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1'), quorum: 2 });
    const id = version.artifact_id;
    await propose(ctx, agent, id, 1);
    await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
    await transition(ctx, agent, id, 1, 'DRAFT');
    await propose(ctx, agent, id, 1);
    const r = await decide(ctx, bob, id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
    assert.equal(r.version.state, 'PROPOSED', "alice's approval belonged to the previous round");
  });

  it('execution start re-checks that approvals are unexpired; otherwise CONFLICT and nothing changes', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1') });
    const id = version.artifact_id;
    await propose(ctx, agent, id, 1);
    await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'e', expiresInMs: DAY_MS });
    ctx.clock.advance(DAY_MS + 1);
    const before = (await ctx.items.scan()).items;
    await assert.rejects(startExecution(ctx, agent, id, 1), Conflict);
    assert.deepEqual((await ctx.items.scan()).items, before);
    assert.equal((await readVersion(ctx.items, id, 1)).state, 'APPROVED');
  });
});

describe('executions, provenance, archive', () => {
  it('outputs are streamed, recorded once, and immutable; a finished run takes no more uploads', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1') });
    const id = version.artifact_id;
    await propose(ctx, agent, id, 1);
    await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
    const run = await startExecution(ctx, agent, id, 1);
    const big = Buffer.alloc(3 * 1024 * 1024, 'a');
    const rec = await uploadOutput(ctx, agent, run.run_id, 'stdout.log', bytesOf(big));
    assert.equal(rec.size, big.length);
    assert.equal(rec.digest, sha256(big));
    await assert.rejects(uploadOutput(ctx, agent, run.run_id, 'stdout.log', bytesOf('again')), Conflict);
    await assert.rejects(uploadOutput(ctx, agent, run.run_id, 'other.txt', bytesOf('x')), AlpError);
    const done = await finishExecution(ctx, agent, run.run_id, { status: 'SUCCEEDED', exitCode: 0 });
    assert.equal(done.status, 'SUCCEEDED');
    await assert.rejects(uploadOutput(ctx, agent, run.run_id, 'stderr.log', bytesOf('late')), Conflict);
    await assert.rejects(finishExecution(ctx, agent, run.run_id, { status: 'FAILED', exitCode: 1 }), Conflict);
    assert.equal((await readVersion(ctx.items, id, 1)).state, 'EXECUTED');
    assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);
  });

  it('provenance is chained, derived into provenance/{id}.json with its digest, and exported as in-toto', async () => {
    const ctx = await embeddedContext();
    // The statement's builder is the installation (builder.id urn:alp:installation:{id}): it needs the record init writes.
    await initInstallation(ctx);
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1') });
    const id = version.artifact_id;
    const { addProvenance } = await import('../../src/lifecycle/provenance.ts');
    await Promise.all([
      addProvenance(ctx, agent, id, { action: 'fetch', inputs: [sha256('src')] }),
      addProvenance(ctx, agent, id, { action: 'generate', model: 'm@1', outputs: [version.content_hash] }),
      addProvenance(ctx, agent, id, { action: 'lint', tool: 'shellcheck@0.9' }),
    ]);
    const { head } = await showArtifact(ctx, id);
    const doc = await buildProvenanceDocument(ctx, id);
    assert.equal(doc.steps, 3);
    assert.equal(head.provenance_hash, sha256(doc.bytes), 'the stored document is the one derived from all steps');
    assert.equal((await collect(await ctx.content.get(`provenance/${id}.json`, sha256(doc.bytes)))).toString(), doc.bytes.toString());
    const statement = await inTotoStatement(ctx, id);
    assert.equal(statement._type, 'https://in-toto.io/Statement/v1');
    assert.equal(statement.predicateType, 'https://slsa.dev/provenance/v1');
    assert.deepEqual(statement.subject, [
      // The subjects are what the steps produced (issue 20 item 3): v1's content, output of step 2 ('generate').
      { name: 'x@v1/f', digest: { sha256: version.content_hash.slice(7) }, annotations: { artifact_id: id, version: 1, steps: [2] } },
    ]);
  });

  it('archive refuses unsettled artifacts', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('1') });
    await assert.rejects(archiveArtifact(ctx, alice, version.artifact_id), Conflict);
  });
});
