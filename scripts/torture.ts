/**
 * `npm run torture`: the hardening campaign of issue 10, parts 1 and 2, with the figures.
 *
 *   1. crash campaign (test/torture/campaign.ts): randomized workloads SIGKILLed at random points,
 *      thousands of times; after every kill the installation is checked (reconcile VERIFIED, audit
 *      chains, telemetry counters, no temp files after the next start, every acknowledged operation
 *      visible); at the end of every installation's segment a retention sweep and a verified read of
 *      every acknowledged object;
 *   2. fault matrix (test/faults/matrix.ts): every service operation × every fault kind × every
 *      storage call it makes.
 *
 * Options (or environment):
 *   --kills N        crash points to reach (ALP_TORTURE_KILLS, default 2000)
 *   --seed S         seed of the whole campaign (ALP_TORTURE_SEED, default: random, printed)
 *   --lanes L        embedded installations worked on side by side (default 2)
 *   --distributed D  of the kills, how many on DynamoDB Local + s3rver (ALP_TORTURE_DISTRIBUTED, default 100)
 *   --sample K       fault matrix: at most K call points per operation × fault (default: every point)
 *   --no-crash | --no-faults   run one part only
 *   --json FILE      also write both reports as JSON
 *   --dir DIR        keep installations under DIR (default: a temp directory, kept only on failure)
 * Exit code 0 only when nothing failed.
 */
import fs from 'node:fs';
import { codesTable, type MatrixReport, matrixTable, runMatrix } from '../test/faults/matrix.ts';
import { type CampaignReport, runCampaign, summarize } from '../test/torture/campaign.ts';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

function option(name: string, env?: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0) return process.argv[i + 1];
  return env ? process.env[env] : undefined;
}
const flag = (name: string) => process.argv.includes(`--${name}`);
const int = (text: string | undefined, fallback: number) => {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`not a whole number: ${text}`);
  return n;
};

const kills = int(option('kills', 'ALP_TORTURE_KILLS'), 2000);
const seed = int(option('seed', 'ALP_TORTURE_SEED'), Math.floor(Math.random() * 2 ** 31));
const lanes = int(option('lanes'), 2);
const distributed = Math.min(kills, int(option('distributed', 'ALP_TORTURE_DISTRIBUTED'), 100));
const sample = option('sample');
const log = (line: string) => process.stdout.write(`${line}\n`);

let crash: CampaignReport | undefined;
let faults: MatrixReport | undefined;
let failed = false;

if (!flag('no-crash')) {
  log(`## Crash campaign: npm run torture -- --kills ${kills} --seed ${seed} --lanes ${lanes} --distributed ${distributed}`);
  const dir = option('dir');
  crash = await runCampaign({ kills, seed, lanes, distributedKills: distributed, log, ...(dir ? { dir } : {}) });
  log('');
  log(summarize(crash));
  for (const f of crash.failures) log(`FAILURE ${JSON.stringify(f)}`);
  if (crash.failures.length) log(`installations of failed runs are kept under ${crash.dir}`);
  failed ||= crash.failures.length > 0;
}

if (!flag('no-faults')) {
  log('');
  log(`## Fault matrix${sample ? ` (at most ${sample} call points per operation × fault)` : ' (every call point)'}`);
  faults = await runMatrix({ log, ...(sample ? { sample: int(sample, 1) } : {}) });
  const bad = faults.cases.filter((c) => c.problems.length > 0);
  log('');
  log(matrixTable(faults.cases));
  log('');
  log(codesTable(faults.cases));
  log('');
  const errors = faults.cases.filter((c) => c.outcome === 'error');
  log(
    `${faults.cases.length} faulted runs over ${Object.values(faults.points).reduce((a, b) => a + b, 0)} storage calls of ${Object.keys(faults.points).length} operations: ` +
      `${faults.cases.length - errors.length} completed, ${errors.length} failed with a clear error, ${bad.length} with a problem; ${faults.seconds.toFixed(0)} s`,
  );
  for (const c of bad) log(`PROBLEM ${JSON.stringify(c)}`);
  failed ||= bad.length > 0;
}

const json = option('json');
if (json) fs.writeFileSync(json, `${JSON.stringify({ crash, faults }, null, 2)}\n`);
process.exit(failed ? 1 : 0);
