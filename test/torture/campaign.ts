/**
 * The crash campaign (issue 10, part 1): workers (test/torture/worker.ts) run a seeded random workload
 * on an installation and are SIGKILLed at random points — a timed kill after a random delay, a kill
 * right after start, a kill while the installation is being opened, a self-kill at the n-th storage
 * call of a kind (before or after it reached the store), or a kill of `alp start` / `alp init` — and
 * after every kill the installation is checked (test/torture/checks.ts). The next worker continues on
 * the same installation with the clock moved forward, so state (and retention's grace and quarantine
 * periods) accumulate; after a segment of kills a fresh installation starts (which bounds the cost of
 * the per-kill reconciliation). Each kill is one crash point.
 *
 * `npm run torture` (scripts/torture.ts) runs thousands; test/torture/torture.test.ts a short smoke.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ManualClock } from '../../src/core/clock.ts';
import { parseContentUrl, parseMetadataUrl, type StorageConfig } from '../../src/core/config.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { activateRestore, reconcile } from '../../src/recovery/reconcile.ts';
import { restoreBackup } from '../../src/recovery/restore.ts';
import { localTrustedHost } from '../../src/retention/host.ts';
import { contentRootId, observationKey } from '../../src/retention/model.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { openInstallation } from '../../src/runtime/open.ts';
import { readFence } from '../../src/system/fence.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch, readEpoch } from '../../src/system/state.ts';
import { CheckFailure, checkInstallation, readBackAcknowledged } from './checks.ts';
import { readJournal, repairJournal } from './journal.ts';
import { type Rng, rng } from './rng.ts';
import type { KillTarget, WorkerOptions } from './worker.ts';

const root = path.resolve(import.meta.dirname, '../..');
const tsx = import.meta.resolve('tsx');
const WORKER = path.join(import.meta.dirname, 'worker.ts');
const CLI = path.join(root, 'src/cli/main.ts');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

export interface CampaignOptions {
  /** Crash points to reach (SIGKILLs that landed), over all lanes. */
  kills: number;
  seed: number;
  /** Embedded installations worked on side by side (default 2). */
  lanes?: number;
  /** Of `kills`, how many on DynamoDB Local + s3rver (default 0). */
  distributedKills?: number;
  /** Kills per installation before a fresh one starts (default 25–45). */
  segment?: [number, number];
  /** Where installations live (default: a new temp directory, removed unless something failed). */
  dir?: string;
  /** Workload operations per run at most (default 120). */
  maxOps?: number;
  log?: (line: string) => void;
}

export interface Failure {
  lane: string;
  run: number;
  kind: string;
  message: string;
  dir: string;
  mode?: string;
}

export interface CampaignReport {
  seed: number;
  runs: number;
  kills: number;
  completedRuns: number;
  installations: number;
  byMode: Record<string, number>;
  byPhase: Record<string, number>;
  byEngine: Record<string, number>;
  acknowledged: Record<string, number>;
  ackTotal: number;
  checksPassed: number;
  checksRun: number;
  bytesReconciled: number;
  objectsReconciled: number;
  auditEntriesVerified: number;
  acknowledgedObjectsReadBack: number;
  acknowledgedBytesReadBack: number;
  fenceRecoveries: number;
  tempFilesRemoved: number;
  tornJournalLines: number;
  orphansAtLastCheck: number;
  conflicts: Record<string, number>;
  retention: { quarantined: number; purged: number };
  telemetry: { delivered: number; dropped: number };
  bootstrap: { firstStartsKilled: number; tokensShownOnce: number; tokensShownTwice: number };
  /** The retention sweep at the end of every segment. */
  reclaim: { orphansBefore: number; purged: number; purgedBytes: number; keptBecause: Record<string, number> };
  failures: Failure[];
  seconds: number;
  dir: string;
}

interface Lane {
  name: string;
  engine: 'sqlite+fs' | 'dynamodb+s3';
  kills: number;
  seed: number;
}

interface Installation {
  dir: string;
  config: StorageConfig;
  urls: { metadata: string; content: string };
  env: Record<string, string>;
  journal: string;
  backups: string;
  proof: string;
}

function emptyReport(seed: number, dir: string): CampaignReport {
  return {
    seed,
    runs: 0,
    kills: 0,
    completedRuns: 0,
    installations: 0,
    byMode: {},
    byPhase: {},
    byEngine: {},
    acknowledged: {},
    ackTotal: 0,
    checksPassed: 0,
    checksRun: 0,
    bytesReconciled: 0,
    objectsReconciled: 0,
    auditEntriesVerified: 0,
    acknowledgedObjectsReadBack: 0,
    acknowledgedBytesReadBack: 0,
    fenceRecoveries: 0,
    tempFilesRemoved: 0,
    tornJournalLines: 0,
    orphansAtLastCheck: 0,
    conflicts: {},
    retention: { quarantined: 0, purged: 0 },
    telemetry: { delivered: 0, dropped: 0 },
    bootstrap: { firstStartsKilled: 0, tokensShownOnce: 0, tokensShownTwice: 0 },
    reclaim: { orphansBefore: 0, purged: 0, purgedBytes: 0, keptBecause: {} },
    failures: [],
    seconds: 0,
    dir,
  };
}

const bump = (m: Record<string, number>, k: string, by = 1) => {
  m[k] = (m[k] ?? 0) + by;
};

export async function runCampaign(opts: CampaignOptions): Promise<CampaignReport> {
  const started = performance.now();
  const dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'alp-torture-'));
  fs.mkdirSync(dir, { recursive: true });
  const log = opts.log ?? (() => {});
  const report = emptyReport(opts.seed, dir);
  const master = rng(opts.seed);
  const laneCount = Math.max(1, opts.lanes ?? 2);
  const distributed = Math.min(opts.kills, opts.distributedKills ?? 0);
  const embedded = opts.kills - distributed;
  const lanes: Lane[] = [];
  for (let i = 0; i < laneCount; i++) {
    const share = Math.floor(embedded / laneCount) + (i < embedded % laneCount ? 1 : 0);
    if (share > 0) lanes.push({ name: `fs${i}`, engine: 'sqlite+fs', kills: share, seed: master.seed() });
  }
  if (distributed > 0) lanes.push({ name: 'dyn', engine: 'dynamodb+s3', kills: distributed, seed: master.seed() });
  const cliStartMs = await measureCliStart(dir);
  log(
    `# torture: seed ${opts.seed}, ${opts.kills} kills over ${lanes.length} lane(s) (${distributed} distributed); alp start listens after ~${Math.round(cliStartMs)} ms; dir ${dir}`,
  );
  let lastProgress = 0;
  const progress = () => {
    if (report.kills - lastProgress >= 50 || report.kills >= opts.kills) {
      lastProgress = report.kills;
      const s = (performance.now() - started) / 1000;
      log(
        `# ${report.kills}/${opts.kills} kills, ${report.runs} runs, ${report.ackTotal} ops acknowledged, ${report.checksPassed}/${report.checksRun} checks passed, ${(report.bytesReconciled / 1e9).toFixed(2)} GB re-hashed, ${report.failures.length} failure(s), ${s.toFixed(0)} s`,
      );
    }
  };
  let servers: Awaited<ReturnType<typeof import('../helpers/distributed.ts')['distributedServers']>> | undefined;
  try {
    if (distributed > 0) {
      const { distributedServers } = await import('../helpers/distributed.ts');
      servers = await distributedServers();
      process.env.AWS_ACCESS_KEY_ID ??= servers.s3.credentials.accessKeyId;
      process.env.AWS_SECRET_ACCESS_KEY ??= servers.s3.credentials.secretAccessKey;
      process.env.AWS_REGION ??= servers.dynamo.region;
    }
    await Promise.all(lanes.map((lane) => runLane(lane, { dir, opts, report, cliStartMs, servers, progress, log })));
  } finally {
    if (servers) {
      const { stopDistributedServers } = await import('../helpers/distributed.ts');
      await stopDistributedServers();
    }
  }
  report.seconds = (performance.now() - started) / 1000;
  if (report.failures.length === 0 && !opts.dir) fs.rmSync(dir, { recursive: true, force: true });
  return report;
}

interface LaneEnv {
  dir: string;
  opts: CampaignOptions;
  report: CampaignReport;
  cliStartMs: number;
  servers: Awaited<ReturnType<typeof import('../helpers/distributed.ts')['distributedServers']>> | undefined;
  progress: () => void;
  log: (line: string) => void;
}

async function newInstallation(lane: Lane, n: number, env: LaneEnv): Promise<Installation> {
  const dir = path.join(env.dir, `${lane.name}-${n}`);
  fs.mkdirSync(dir, { recursive: true });
  let urls: { metadata: string; content: string };
  let procEnv: Record<string, string> = {};
  if (lane.engine === 'sqlite+fs') {
    urls = { metadata: `sqlite:${path.join(dir, 'alp.db')}`, content: `file:${path.join(dir, 'content')}` };
  } else {
    const { dynamo, s3 } = env.servers as NonNullable<LaneEnv['servers']>;
    const table = dynamo.tableName('torture');
    urls = {
      metadata: `dynamodb://${table}?region=${dynamo.region}&endpoint=${encodeURIComponent(dynamo.endpoint)}`,
      content: `s3://${s3.bucket}/torture-${lane.seed}-${n}/?region=${s3.region}&endpoint=${encodeURIComponent(s3.endpoint)}`,
    };
    procEnv = {
      AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      AWS_REGION: dynamo.region,
    };
  }
  return {
    dir,
    urls,
    env: procEnv,
    config: { metadata: parseMetadataUrl(urls.metadata), content: parseContentUrl(urls.content) },
    journal: path.join(dir, 'journal.jsonl'),
    backups: path.join(dir, 'backups'),
    proof: path.join(dir, 'proof', 'alp.db'),
  };
}

/** A verified, activated restore of the installation: what retention approvals point to. */
async function makeProof(inst: Installation, now: Date): Promise<void> {
  const clock = new ManualClock(now);
  const src = await openInstallation(inst.config, clock);
  const out = path.join(inst.dir, 'proof-backup');
  try {
    await createBackup(src.ctx, { out, actor: 'os:torture' });
  } finally {
    await src.close();
  }
  const target = await openInstallation({ metadata: { engine: 'sqlite', path: inst.proof }, content: inst.config.content }, clock);
  try {
    await restoreBackup(target.ctx, { from: out, actor: 'os:torture' });
    const rep = await reconcile(target.ctx, { actor: 'os:torture' });
    if (rep.status !== 'VERIFIED') throw new Error(`the proof restore did not verify: ${JSON.stringify(rep.findings.slice(0, 3))}`);
    await activateRestore(target.ctx, rep.reconcile_id, { id: 'os:torture', kind: 'human' });
  } finally {
    await target.close();
  }
}

type Mode = 'timed' | 'early' | 'startup' | 'self' | 'cli';

interface RunOutcome {
  killed: boolean;
  completed: boolean;
  phase: string;
  stdout: string;
  failure?: string;
}

function spawnNode(args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--import', tsx, ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ALP_TOKEN: '' },
  });
}

/** What the worker was doing when it died: the operation, and the storage call in flight. */
function phaseOf(stdout: string): string {
  let op = 'load';
  const open: string[] = [];
  for (const line of stdout.split('\n')) {
    if (line === 'OPENING') op = 'open';
    else if (line === 'READY') op = 'idle';
    else if (line.startsWith('@')) {
      op = line.slice(1);
      open.length = 0;
    } else if (line.startsWith('~')) {
      const c = line.slice(1);
      if (c === c.toLowerCase()) open.push(c);
      else {
        const i = open.lastIndexOf(c.toLowerCase());
        if (i >= 0) open.splice(i, 1);
      }
    }
  }
  const names: Record<string, string> = { p: 'put', t: 'commit', d: 'delete', c: 'copy', s: 'snapshot' };
  const inflight = open.length ? names[open[open.length - 1] as string] : undefined;
  return inflight ? `${op}/${inflight}` : op;
}

function runWorker(options: WorkerOptions, env: Record<string, string>, mode: Mode, delayMs: number): Promise<RunOutcome> {
  return new Promise((resolve) => {
    const child = spawnNode([WORKER, JSON.stringify(options)], env);
    let out = '';
    let err = '';
    let armed = false;
    const arm = (ms: number) => {
      armed = true;
      setTimeout(() => child.kill('SIGKILL'), ms);
    };
    const watchdog = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
      if (armed) return;
      if (mode === 'startup' && out.includes('OPENING\n')) arm(delayMs);
      else if ((mode === 'timed' || mode === 'early') && out.includes('READY\n')) arm(delayMs);
    });
    child.stderr?.on('data', (b: Buffer) => {
      err += b.toString();
    });
    child.on('exit', (code, signal) => {
      clearTimeout(watchdog);
      const killed = signal === 'SIGKILL';
      const completed = out.includes('DONE\n') && code === 0;
      const failure = !killed && !completed ? `worker exited ${code}: ${err.trim().slice(0, 2000)}` : undefined;
      resolve({ killed, completed, phase: phaseOf(out), stdout: out, ...(failure ? { failure } : {}) });
    });
  });
}

/** `alp start` / `alp init` in a real process, SIGKILLed after `killMs` (undefined: run `start` until it listens, then SIGTERM). */
function runCli(
  args: string[],
  env: Record<string, string>,
  killMs: number | undefined,
): Promise<{ killed: boolean; code: number | null; stdout: string; stderr: string; listenedMs?: number }> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const child = spawnNode([CLI, ...args], env);
    let out = '';
    let err = '';
    let listenedMs: number | undefined;
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
      // The status document (with the URL) comes after the server's own log lines.
      if (killMs === undefined && listenedMs === undefined && out.split('\n').some((l) => l.startsWith('{') && l.includes('"url"'))) {
        listenedMs = performance.now() - t0;
        child.kill('SIGTERM');
      }
    });
    child.stderr?.on('data', (b: Buffer) => {
      err += b.toString();
    });
    if (killMs !== undefined) setTimeout(() => child.kill('SIGKILL'), killMs);
    const watchdog = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('exit', (code, signal) => {
      clearTimeout(watchdog);
      resolve({ killed: signal === 'SIGKILL', code, stdout: out, stderr: err, ...(listenedMs !== undefined ? { listenedMs } : {}) });
    });
  });
}

async function measureCliStart(dir: string): Promise<number> {
  const scratch = path.join(dir, 'cli-probe');
  const r = await runCli(['start', '--data', scratch, '--port', '0', '--json'], {}, undefined);
  fs.rmSync(scratch, { recursive: true, force: true });
  if (r.listenedMs === undefined) throw new Error(`alp start did not come up: ${r.stderr}`);
  return r.listenedMs;
}

function storageArgs(inst: Installation): string[] {
  return ['--metadata', inst.urls.metadata, '--content', inst.urls.content];
}

function tokensIn(stdout: string): number {
  const line = stdout.split('\n').find((l) => l.startsWith('{') && l.includes('"tokens"'));
  if (!line) return 0;
  try {
    return ((JSON.parse(line) as { tokens?: unknown[] }).tokens ?? []).length;
  } catch {
    return 0;
  }
}

function chooseKill(r: Rng, cliStartMs: number): { mode: Mode; delayMs: number; selfKill?: WorkerOptions['selfKill'] } {
  const mode = r.weighted<Mode>([
    ['timed', 52],
    ['early', 8],
    ['startup', 8],
    ['self', 28],
    ['cli', 4],
  ]) as Mode;
  switch (mode) {
    case 'timed':
      return { mode, delayMs: r.range(0, 1500) };
    case 'early':
      return { mode, delayMs: r.range(0, 30) };
    case 'startup':
      return { mode, delayMs: r.range(0, 60) };
    case 'cli':
      return { mode, delayMs: r.range(0, Math.round(cliStartMs * 1.15)) };
    case 'self': {
      const target = r.weighted<KillTarget>([
        ['tx', 38],
        ['put', 18],
        ['put-mid', 16],
        ['update', 10],
        ['delete', 6],
        ['copy', 6],
        ['snapshot', 6],
      ]) as KillTarget;
      const max: Record<KillTarget, number> = { tx: 60, put: 25, 'put-mid': 15, update: 12, delete: 3, copy: 6, snapshot: 1 };
      return { mode, delayMs: 0, selfKill: { target, n: r.range(1, max[target]), when: r.chance(0.5) ? 'before' : 'after' } };
    }
  }
}

async function runLane(lane: Lane, env: LaneEnv): Promise<void> {
  const r = rng(lane.seed);
  const { report, opts } = env;
  const [segMin, segMax] = opts.segment ?? [25, 45];
  let done = 0;
  let instNo = 0;
  let now = Date.parse('2026-03-01T00:00:00.000Z');
  const fail = (inst: Installation, run: number, kind: string, message: string, mode?: string) => {
    report.failures.push({ lane: lane.name, run, kind, message: message.slice(0, 4000), dir: inst.dir, ...(mode ? { mode } : {}) });
    env.log(`# FAILURE lane ${lane.name} run ${run} [${kind}] ${message.slice(0, 600)}`);
  };
  let run = 0;
  while (done < lane.kills) {
    if (report.failures.length >= 25) {
      env.log(`# lane ${lane.name} stops: too many failures`);
      return;
    }
    const inst = await newInstallation(lane, instNo++, env);
    report.installations++;
    const failuresBefore = report.failures.length;
    // The first `alp start` of a brand-new installation, killed at a random point; then one that completes.
    const first = await runCli(
      ['start', ...storageArgs(inst), '--port', '0', '--json'],
      inst.env,
      r.range(0, Math.round(env.cliStartMs * 1.15)),
    );
    const second = await runCli(['start', ...storageArgs(inst), '--port', '0', '--json'], inst.env, undefined);
    if (first.killed) {
      report.bootstrap.firstStartsKilled++;
      done++;
      report.kills++;
      bump(report.byMode, 'cli-first-start');
      bump(report.byEngine, lane.engine);
    }
    if (second.code !== 0 || second.listenedMs === undefined) {
      fail(inst, run, 'start', `alp start after a killed first start failed (${second.code}): ${second.stderr}`);
      continue;
    }
    // The bootstrap tokens are shown at least once: by the killed first start if it got that far,
    // else by the next one (twice when the kill fell between printing them and recording that).
    const shown = tokensIn(first.stdout) + tokensIn(second.stdout);
    if (shown === 2) report.bootstrap.tokensShownOnce++;
    else if (shown === 4) report.bootstrap.tokensShownTwice++;
    else fail(inst, run, 'bootstrap', `the bootstrap tokens were shown ${shown / 2} time(s) over a killed first start and the next start`);
    await makeProof(inst, new Date(now));
    const segment = r.range(segMin, segMax);
    let segKills = 0;
    let broken = false;
    while (segKills < segment && done < lane.kills && !broken) {
      run++;
      now += r.range(1, 3) * HOUR + (r.chance(0.12) ? 8 * DAY : 0) + (r.chance(0.04) ? 31 * DAY : 0);
      const kill = chooseKill(r, env.cliStartMs);
      let outcome: RunOutcome;
      if (kill.mode === 'cli') {
        const args = r.chance(0.6) ? ['start', ...storageArgs(inst), '--port', '0', '--json'] : ['init', ...storageArgs(inst), '--json'];
        const res = await runCli(args, { ...inst.env, ALP_NOW: new Date(now).toISOString() }, kill.delayMs);
        outcome = { killed: res.killed, completed: !res.killed && res.code === 0, phase: `cli ${args[0]}`, stdout: res.stdout };
        if (!res.killed && res.code !== 0) outcome.failure = `alp ${args[0]} exited ${res.code}: ${res.stderr}`;
      } else {
        const options: WorkerOptions = {
          metadata: inst.urls.metadata,
          content: inst.urls.content,
          now: new Date(now).toISOString(),
          seed: r.seed(),
          run,
          journal: inst.journal,
          restore: inst.proof,
          backups: inst.backups,
          maxOps: opts.maxOps ?? 120,
          ...(kill.selfKill ? { selfKill: kill.selfKill } : {}),
        };
        outcome = await runWorker(options, inst.env, kill.mode, kill.delayMs);
      }
      report.runs++;
      if (outcome.killed) {
        done++;
        segKills++;
        report.kills++;
        bump(report.byMode, kill.mode === 'self' ? `self ${kill.selfKill?.target} ${kill.selfKill?.when}` : kill.mode);
        bump(report.byPhase, outcome.phase);
        bump(report.byEngine, lane.engine);
      } else if (outcome.completed) report.completedRuns++;
      if (outcome.failure) fail(inst, run, 'worker', outcome.failure, kill.mode);
      for (const line of outcome.stdout.split('\n')) if (line.startsWith('#conflict ')) bump(report.conflicts, line.slice(10));
      if (repairJournal(inst.journal)) report.tornJournalLines++;
      // The checks, as the next start and an operator would see the installation.
      const clock = new ManualClock(now + 10 * 60_000);
      const { lines } = readJournal(inst.journal);
      let opened: Awaited<ReturnType<typeof openInstallation>> | undefined;
      try {
        opened = await openInstallation(inst.config, clock);
        const res = await checkInstallation(opened.ctx, inst.config, lines, clock);
        report.checksRun += res.checks;
        report.checksPassed += res.checks;
        report.bytesReconciled += res.reconcile.bytes;
        report.objectsReconciled += res.reconcile.objects;
        report.auditEntriesVerified += res.reconcile.entries;
        report.tempFilesRemoved += res.removedTemp;
        if (res.fenceRecovered) report.fenceRecoveries++;
        report.orphansAtLastCheck = res.reconcile.unexpected;
        report.telemetry.delivered = Math.max(report.telemetry.delivered, res.telemetry.delivered);
      } catch (e) {
        report.checksRun++;
        fail(
          inst,
          run,
          e instanceof CheckFailure ? e.check : 'check',
          e instanceof Error ? e.message : String(e),
          `${kill.mode} ${outcome.phase}`,
        );
        broken = true;
      } finally {
        await opened?.close();
      }
      env.progress();
    }
    // The end of the segment: tallies, and a verified read of every object ever acknowledged.
    const { lines } = readJournal(inst.journal);
    for (const l of lines) {
      bump(report.acknowledged, l.op);
      report.ackTotal++;
      if (l.op === 'retention') {
        report.retention.quarantined += l.quarantined.length;
        report.retention.purged += l.purged.length;
      }
    }
    if (!broken) {
      const clock = new ManualClock(now + 20 * 60_000);
      const opened = await openInstallation(inst.config, clock);
      try {
        // Retention over everything the kills left behind (observe, quarantine 8 days later, purge 31
        // days after that); then every acknowledged object is read back, verified.
        const sweep = await reclaimOrphans(opened.ctx, clock, inst.proof);
        report.reclaim.orphansBefore += sweep.before;
        report.reclaim.purged += sweep.purged;
        report.reclaim.purgedBytes += sweep.purgedBytes;
        for (const [why, n] of Object.entries(sweep.kept)) bump(report.reclaim.keptBecause, why, n);
        const after = await reconcile(opened.ctx, { actor: 'torture-operator' });
        if (after.status !== 'VERIFIED')
          throw new CheckFailure('reclaim', `reconcile after the retention sweep FAILED: ${JSON.stringify(after.findings.slice(0, 3))}`);
        const back = await readBackAcknowledged(opened.ctx, lines);
        report.acknowledgedObjectsReadBack += back.objects;
        report.acknowledgedBytesReadBack += back.bytes;
      } catch (e) {
        fail(inst, run, e instanceof CheckFailure ? e.check : 'read-back', e instanceof Error ? e.message : String(e));
      } finally {
        await opened.close();
      }
    }
    if (report.failures.length === failuresBefore && lane.engine === 'sqlite+fs') fs.rmSync(inst.dir, { recursive: true, force: true });
  }
}

/**
 * A full retention cycle at the end of a segment: QUARANTINE (first observations), 8 days later
 * QUARANTINE (quarantine what is due), 31 days later PURGE. Returns how many orphans there were, how
 * many were purged, and why the others are kept (the first reference retention names, ids elided).
 */
async function reclaimOrphans(
  ctx: ServiceContext,
  clock: ManualClock,
  restore: string,
): Promise<{ before: number; purged: number; purgedBytes: number; kept: Record<string, number> }> {
  if (await readFence(ctx)) {
    await advanceEpoch(ctx.items, 'torture-operator', 'segment end', clock.now().toISOString());
    await recoverMaintenance(ctx, await readEpoch(ctx.items), 'torture-operator');
  }
  const before = (await reconcile(ctx, { actor: 'torture-operator' })).findings.filter((f) => f.kind === 'unexpected');
  const host = localTrustedHost(ctx, {
    owner: 'torture sweep',
    approver: { id: 'os:torture', kind: 'human' },
    evidenceRef: 'CHG-SWEEP',
    restore,
  });
  const retention = new ArtifactRetention(ctx.items, ctx.content, { clock });
  const run = async (action: 'QUARANTINE' | 'PURGE') => {
    const r = await retention.run(await readEpoch(ctx.items), action, host, { maxArtifacts: 1000 });
    if (r.status === 'REFUSED') throw new CheckFailure('reclaim', `retention ${action} refused: ${r.reason}`);
    return r;
  };
  await run('QUARANTINE');
  clock.advance(8 * DAY);
  await run('QUARANTINE');
  clock.advance(31 * DAY);
  const purge = await run('PURGE');
  const purged = new Set(purge.purged);
  const scan = await scanReferences(ctx);
  const kept: Record<string, number> = {};
  for (const f of before) {
    const key = f.key as string;
    if (purged.has(key)) continue;
    const obs = await ctx.items.get(observationKey(contentRootId(ctx.content.location), key, ctx.layout.index_shards), {
      consistent: true,
    });
    const why = scan.referencedWhy(key) ?? `unreferenced, observation ${String(obs?.state ?? 'none')}`;
    bump(
      kept,
      why
        .replace(/[0-9A-HJKMNP-TV-Z]{26}/g, 'ID')
        .replace(/sha256:[0-9a-f]{64}/g, 'DIGEST')
        .replace(/\d+/g, 'N')
        .slice(0, 100),
    );
  }
  const purgedBytes = before.filter((f) => purged.has(f.key as string)).reduce((n, f) => n + Number(/^(\d+)/.exec(f.detail)?.[1] ?? 0), 0);
  return { before: before.length, purged: purged.size, purgedBytes, kept };
}

/** The summary table (markdown). */
export function summarize(r: CampaignReport): string {
  const rows: Array<[string, string]> = [
    ['seed', String(r.seed)],
    ['installations', String(r.installations)],
    ['worker / CLI runs', String(r.runs + r.installations * 2)],
    ['SIGKILLs (crash points)', String(r.kills)],
    ['runs that finished before their kill', String(r.completedRuns)],
    ['operations acknowledged (journaled after success)', String(r.ackTotal)],
    ['checks passed / run', `${r.checksPassed} / ${r.checksRun}`],
    ['bytes re-hashed by reconcile (sum over checks)', `${r.bytesReconciled} (${(r.bytesReconciled / 1e9).toFixed(2)} GB)`],
    ['objects re-hashed by reconcile (sum over checks)', String(r.objectsReconciled)],
    ['audit entries verified (sum over checks)', String(r.auditEntriesVerified)],
    ['acknowledged objects read back verified at segment end', `${r.acknowledgedObjectsReadBack} (${r.acknowledgedBytesReadBack} bytes)`],
    [
      'referenced bytes lost',
      r.failures.some((f) => f.kind === 'reconcile' || f.kind === 'journal' || f.kind === 'read-back') ? 'SEE FAILURES' : '0',
    ],
    ['fences recovered (epoch advance + maintenance release)', String(r.fenceRecoveries)],
    ['temp files removed by the next start', String(r.tempFilesRemoved)],
    ['torn journal lines (kill inside the append)', String(r.tornJournalLines)],
    ['retention: quarantined / purged (acknowledged)', `${r.retention.quarantined} / ${r.retention.purged}`],
    [
      'first `alp start` killed / bootstrap tokens shown once / twice',
      `${r.bootstrap.firstStartsKilled} / ${r.bootstrap.tokensShownOnce} / ${r.bootstrap.tokensShownTwice}`,
    ],
    [
      'retention sweep at segment ends: orphans / purged (bytes)',
      `${r.reclaim.orphansBefore} / ${r.reclaim.purged} (${r.reclaim.purgedBytes})`,
    ],
    ['failures', String(r.failures.length)],
    ['wall time', `${r.seconds.toFixed(0)} s`],
  ];
  const out = ['| figure | value |', '|---|---|', ...rows.map(([k, v]) => `| ${k} | ${v} |`)];
  const table = (title: string, m: Record<string, number>, unit = 'kills') => {
    out.push('', `| ${title} | ${unit} |`, '|---|---|');
    for (const [k, v] of Object.entries(m).sort((a, b) => b[1] - a[1])) out.push(`| ${k} | ${v} |`);
  };
  table('kill mode', r.byMode);
  table('phase at the kill (operation/storage call in flight)', r.byPhase);
  table('engine', r.byEngine);
  table('orphans the end-of-segment retention sweep kept, and why', r.reclaim.keptBecause, 'objects');
  out.push('', '| acknowledged operation | count |', '|---|---|');
  for (const [k, v] of Object.entries(r.acknowledged).sort((a, b) => b[1] - a[1])) out.push(`| ${k} | ${v} |`);
  return out.join('\n');
}
