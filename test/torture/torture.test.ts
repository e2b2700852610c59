/**
 * The smoke version of `npm run torture` part 1 (scripts/torture.ts): a short crash campaign on the
 * embedded profile — workers SIGKILLed at random points (timed, right after start, while opening, at
 * the n-th storage call, `alp start` itself), the installation checked after every kill, retention
 * swept and every acknowledged object read back at the end of each segment. ALP_TORTURE_SMOKE_KILLS
 * (default 16) and ALP_TORTURE_SEED (default fixed) set its size and seed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runCampaign, summarize } from './campaign.ts';

const KILLS = Number(process.env.ALP_TORTURE_SMOKE_KILLS ?? 16);
const SEED = Number(process.env.ALP_TORTURE_SEED ?? 20261130);

describe('crash campaign (smoke)', () => {
  it(`${KILLS} SIGKILLs at random points: every check passes after every kill, nothing acknowledged is lost`, async (t) => {
    const report = await runCampaign({ kills: KILLS, seed: SEED, lanes: 2, segment: [6, 9], maxOps: 80 });
    t.diagnostic(summarize(report).split('\n').slice(0, 22).join('\n'));
    assert.deepEqual(report.failures, [], JSON.stringify(report.failures, null, 2));
    assert.ok(report.kills >= KILLS, `${report.kills} kills`);
    assert.equal(report.checksPassed, report.checksRun);
    assert.ok(report.checksRun >= report.kills * 5, 'every kill was checked');
    assert.ok(report.ackTotal > 0 && report.acknowledgedObjectsReadBack > 0, 'work was acknowledged and read back');
  });
});
