import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { history } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { AlpError } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { addVersion, createArtifact, showArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { finishExecution, startExecution } from '../../src/lifecycle/executions.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { findMove, isVersionState } from '../../src/lifecycle/state-machine.ts';
import { propose, transition } from '../../src/lifecycle/transitions.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';

const principals: Principal[] = [
  { id: 'alice', kind: 'human' },
  { id: 'bob', kind: 'human' },
  { id: 'carol', kind: 'human' },
  { id: 'agent-1', kind: 'agent' },
  { id: 'svc', kind: 'service' },
];

const opArb = fc.oneof(
  fc.record({ kind: fc.constant('version' as const) }),
  fc.record({ kind: fc.constant('propose' as const), v: fc.nat(4) }),
  fc.record({ kind: fc.constant('withdraw' as const), v: fc.nat(4) }),
  fc.record({
    kind: fc.constant('approve' as const),
    v: fc.nat(4),
    who: fc.nat(4),
    wrongHash: fc.boolean(),
    ttlDays: fc.integer({ min: 1, max: 3 }),
  }),
  fc.record({ kind: fc.constant('reject' as const), v: fc.nat(4), who: fc.nat(4) }),
  fc.record({ kind: fc.constant('start' as const), v: fc.nat(4), who: fc.nat(4) }),
  fc.record({ kind: fc.constant('finish' as const), ok: fc.boolean() }),
  fc.record({ kind: fc.constant('compensate' as const), v: fc.nat(4) }),
  fc.record({ kind: fc.constant('advance' as const), days: fc.integer({ min: 1, max: 2 }) }),
);

describe('lifecycle invariants under random operations (property)', () => {
  it('never an illegal state, a lost audit item, a broken chain, or an approval counted twice', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 2 }), async (ops, quorum) => {
        const ctx = await embeddedContext();
        const { version } = await createArtifact(ctx, principals[3] as Principal, { name: 'p', filename: 'f', body: bytesOf('0'), quorum });
        const id = version.artifact_id;
        const artifacts = new Set([id]);
        const runs: string[] = [];
        let succeeded = 0;
        for (const op of ops) {
          const versions = (await showArtifact(ctx, id)).versions;
          const pick = (n: number) => (versions[n % versions.length] as { version: number }).version;
          try {
            switch (op.kind) {
              case 'version':
                await addVersion(ctx, principals[3] as Principal, id, { filename: 'f', body: bytesOf(String(versions.length)) });
                break;
              case 'propose':
                await propose(ctx, principals[3] as Principal, id, pick(op.v));
                break;
              case 'withdraw':
                await transition(ctx, principals[3] as Principal, id, pick(op.v), 'DRAFT');
                break;
              case 'approve':
                await decide(ctx, principals[op.who] as Principal, id, pick(op.v), {
                  decision: 'APPROVE',
                  evidenceRef: 'ev',
                  expiresInMs: op.ttlDays * DAY_MS,
                  ...(op.wrongHash ? { contentHash: sha256('other') } : {}),
                });
                break;
              case 'reject':
                await decide(ctx, principals[op.who] as Principal, id, pick(op.v), { decision: 'REJECT', evidenceRef: 'no' });
                break;
              case 'start':
                runs.push((await startExecution(ctx, principals[op.who] as Principal, id, pick(op.v))).run_id);
                break;
              case 'finish': {
                const run = runs.pop();
                if (run)
                  await finishExecution(ctx, principals[3] as Principal, run, {
                    status: op.ok ? 'SUCCEEDED' : 'FAILED',
                    exitCode: op.ok ? 0 : 1,
                  });
                break;
              }
              case 'compensate': {
                const r = await compensate(ctx, principals[3] as Principal, id, pick(op.v), {
                  filename: `undo-${succeeded++}.sh`,
                  body: bytesOf('undo'),
                });
                artifacts.add(r.compensation.artifact_id);
                break;
              }
              case 'advance':
                ctx.clock.advance(op.days * DAY_MS);
                break;
            }
          } catch (e) {
            if (!(e instanceof AlpError) || e.code === 'INTERNAL') throw e;
          }
        }
        for (const a of artifacts) {
          const report = await verifyArtifactAudit(ctx, a);
          assert.deepEqual(report.findings, [], `chain of ${a}`);
          for (const v of (await showArtifact(ctx, a)).versions) assert.ok(isVersionState(v.state));
        }
        const entries = await history(ctx, id);
        for (const t of entries.filter((e) => e.type === 'transition' && e.from !== null)) {
          assert.ok(findMove(t.from as never, t.to as never), `illegal ${String(t.from)} → ${String(t.to)}`);
        }
        const approvals = entries.filter((e) => e.type === 'approval');
        for (const a of approvals) assert.equal((a.actor as Principal).kind, 'human', 'only humans decide');
        const counted = approvals.filter((a) => a.decision === 'APPROVE' && a.counted);
        const perRound = new Map<string, Set<string>>();
        for (const a of counted) {
          const k = `${String(a.version)}/${String(a.round)}`;
          const set = perRound.get(k) ?? new Set<string>();
          assert.ok(!set.has((a.actor as Principal).id), `approval by ${(a.actor as Principal).id} counted twice in ${k}`);
          set.add((a.actor as Principal).id);
          perRound.set(k, set);
        }
        for (const t of entries.filter((e) => e.type === 'transition' && e.to === 'APPROVED')) {
          const before = counted.filter((a) => a.version === t.version && (a.seq as number) < (t.seq as number));
          const rounds = new Map<unknown, Set<string>>();
          for (const a of before) rounds.set(a.round, (rounds.get(a.round) ?? new Set()).add((a.actor as Principal).id));
          assert.ok(
            [...rounds.values()].some((s) => s.size >= quorum),
            'APPROVED only with a quorum of distinct counted approvals',
          );
        }
      }),
      { numRuns: 40 },
    );
  });
});
