/**
 * The fault matrix (issue 10, part 2): every service operation × every fault kind × the storage calls
 * it makes. For each operation the calls are first recorded on a clean run; then, for every call and
 * every fault kind that applies to it, the operation runs on a fresh copy of the world with that one
 * fault injected, and afterwards (faults off):
 *
 *   outcome   it completed (and its whole effect is there and readable), or it threw an error that
 *             maps to a clear code and message (toAlpError: what `alp` prints and HTTP answers) and
 *             its effect is absent — or, only for a fault after the write took effect (TIMEOUT_AFTER)
 *             or for journaled maintenance (retention, backups), present as recorded;
 *   no trace  reconcile is VERIFIED (no version, state or output references missing or wrong bytes,
 *             every chain verifies), the telemetry counters equal the items, nothing referenced in the
 *             world (directly or through content) disappeared, every object at a final key holds
 *             whole bytes, a failed backup left no directory that looks complete, and a fence left
 *             by failed maintenance is recoverable the operator's way;
 *   retry     the same operation without the fault then succeeds (or is refused only because the
 *             first attempt in fact took effect).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DigestAccumulator } from '../../src/core/digest.ts';
import { AlpError, toAlpError } from '../../src/core/errors.ts';
import { artifactPk, HEAD_SK, TELQ_PK } from '../../src/core/keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact, openVersionContent } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { finishExecution, readExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import type { HeadItem } from '../../src/lifecycle/model.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { propose, withdraw } from '../../src/lifecycle/transitions.ts';
import { listVersions, readVersion } from '../../src/lifecycle/versions.ts';
import { createBackup, listBackups } from '../../src/recovery/backup.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { contentRootId, observationKey } from '../../src/retention/model.ts';
import { ArtifactRetention, type RetentionResult } from '../../src/retention/retention.ts';
import { queryAll } from '../../src/store/item-store.ts';
import { readFence } from '../../src/system/fence.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch, readEpoch } from '../../src/system/state.ts';
import type { ClaimedRecord } from '../../src/telemetry/queue.ts';
import { assertCountersMatchItems, auditItems } from '../helpers/telemetry-harness.ts';
import { applicableKinds, FAULT_KINDS, type FaultKind, type FaultRule, type StoreName, type TracedCall } from './faulty-stores.ts';
import { agent, alice, BODIES, buildTemplate, chunks, openWorld, retentionHost, type World, type WorldIds } from './world.ts';

export type Effect = 'none' | 'partial' | 'full';

export interface MatrixOp {
  name: string;
  /** Unfaulted set-up on the fresh world (e.g. claim a batch before acknowledging it). */
  prepare?(w: World): Promise<unknown>;
  run(w: World, prepared: unknown, attempt: number): Promise<unknown>;
  /** How much of the intended effect is visible (read without faults). */
  effect(w: World): Promise<Effect>;
  /** Journaled maintenance: an error may leave part of the work done (and the fence held) for recovery. */
  maintenance?: boolean;
  /** A reader: no effect; success must deliver exactly the right bytes. */
  reader?: boolean;
  /** Whether a successful result accounts for an effect short of full (retention's `skipped`, with reasons). */
  explains?(result: unknown): boolean;
}

const retentionExplains = (r: unknown) => {
  const res = r as RetentionResult;
  return res.status === 'NOTHING_TO_DO' || res.skipped.length > 0 || res.reset.length > 0;
};

const version = async (w: World, id: string, n = 1) => (await readVersion(w.clean.items, id, n)).state;
const head = async (w: World, id: string) =>
  (await w.clean.items.get({ PK: artifactPk(id), SK: HEAD_SK }, { consistent: true })) as HeadItem;

export const OPS: MatrixOp[] = [
  {
    name: 'createArtifact',
    run: (w) => createArtifact(w.ctx, agent, { name: 'made-by-op', filename: 'new.bin', body: chunks(BODIES.create) }),
    effect: async (w) => {
      const page = await w.clean.items.query({ index: 'GSI1', pk: 'NAME#made-by-op' });
      return page.items.length > 0 ? 'full' : 'none';
    },
  },
  {
    name: 'addVersion',
    run: (w) => addVersion(w.ctx, agent, w.ids.plain, { filename: 'run.sh', body: chunks(BODIES.version) }),
    effect: async (w) => ((await listVersions(w.clean.items, w.ids.plain)).length > 1 ? 'full' : 'none'),
  },
  {
    name: 'propose',
    run: (w) => propose(w.ctx, agent, w.ids.draft, 1),
    effect: async (w) => ((await version(w, w.ids.draft)) === 'PROPOSED' ? 'full' : 'none'),
  },
  {
    name: 'withdraw',
    run: (w) => withdraw(w.ctx, agent, w.ids.proposed, 1),
    effect: async (w) => ((await version(w, w.ids.proposed)) === 'DRAFT' ? 'full' : 'none'),
  },
  {
    name: 'decide APPROVE',
    run: (w) => decide(w.ctx, alice, w.ids.proposed, 1, { decision: 'APPROVE', evidenceRef: 'CR-F' }),
    effect: async (w) => ((await version(w, w.ids.proposed)) === 'APPROVED' ? 'full' : 'none'),
  },
  {
    name: 'decide REJECT',
    run: (w) => decide(w.ctx, alice, w.ids.proposed, 1, { decision: 'REJECT', evidenceRef: 'CR-F' }),
    effect: async (w) => ((await version(w, w.ids.proposed)) === 'REJECTED' ? 'full' : 'none'),
  },
  {
    name: 'startExecution',
    run: (w) => startExecution(w.ctx, agent, w.ids.approved, 1),
    effect: async (w) => ((await version(w, w.ids.approved)) === 'EXECUTING' ? 'full' : 'none'),
  },
  {
    name: 'uploadOutput',
    run: (w) => uploadOutput(w.ctx, agent, w.ids.run, 'stdout.log', chunks(BODIES.upload)),
    effect: async (w) => ((await readExecution(w.clean, w.ids.run)).outputs['stdout.log'] ? 'full' : 'none'),
  },
  {
    name: 'finishExecution',
    run: (w) => finishExecution(w.ctx, agent, w.ids.run, { status: 'SUCCEEDED', exitCode: 0 }),
    effect: async (w) => ((await readExecution(w.clean, w.ids.run)).status === 'SUCCEEDED' ? 'full' : 'none'),
  },
  {
    name: 'compensate',
    run: (w) => compensate(w.ctx, agent, w.ids.executed, 1, { filename: 'undo.sh', body: chunks(BODIES.compensate) }),
    effect: async (w) => ((await version(w, w.ids.executed)) === 'COMPENSATING' ? 'full' : 'none'),
  },
  {
    name: 'addProvenance',
    run: (w) => addProvenance(w.ctx, agent, w.ids.plain, { action: 'generate', model: 'm-1', inputs: [] }),
    effect: async (w) => ((((await head(w, w.ids.plain)).provenance_steps as number | undefined) ?? 0) > 0 ? 'full' : 'none'),
  },
  {
    name: 'archiveArtifact',
    run: (w) => archiveArtifact(w.ctx, alice, w.ids.settled),
    effect: async (w) => ((await head(w, w.ids.settled)).archived ? 'full' : 'none'),
  },
  {
    name: 'telemetry claim',
    run: (w) => w.queue.claim(1, 'matrix', w.ctx.clock.now(), { maxRecords: 10, leaseMs: 3_600_000 }),
    effect: async (w) => {
      const leased = (await queryAll(w.clean.items, { pk: TELQ_PK, consistent: true })).filter((i) => i.lease_owner === 'matrix');
      return leased.length === 0 ? 'none' : leased.length >= 10 ? 'full' : 'partial';
    },
  },
  {
    name: 'telemetry acknowledge',
    prepare: (w) => w.queue.claim(1, 'matrix', w.ctx.clock.now(), { maxRecords: 10, leaseMs: 3_600_000 }),
    run: (w, batch) =>
      w.queue.acknowledgeAll(
        1,
        'matrix',
        (batch as ClaimedRecord[]).map((r) => ({ id: r.id, leaseToken: r.leaseToken })),
        w.ctx.clock.now(),
      ),
    effect: async (w) => {
      const { delivered } = await w.queue.counters();
      return delivered === 0 ? 'none' : delivered >= 10 ? 'full' : 'partial';
    },
  },
  {
    name: 'createBackup',
    maintenance: true,
    run: (w, _p, attempt) =>
      createBackup(w.ctx, { out: path.join(w.dir, 'backups', `b${attempt}`), withContent: true, actor: 'os:operator', concurrency: 1 }),
    effect: async (w) => ((await listBackups(w.clean)).filter((b) => b.status === 'COMPLETE').length > 1 ? 'full' : 'none'),
  },
  {
    name: 'retention QUARANTINE',
    maintenance: true,
    run: async (w) => {
      const r = await new ArtifactRetention(w.ctx.items, w.ctx.content, { clock: w.ctx.clock }).run(
        await readEpoch(w.clean.items),
        'QUARANTINE',
        retentionHost(w.ctx, w.ids.restore),
      );
      if (r.status === 'REFUSED') throw new Error(`retention QUARANTINE refused: ${r.reason}`);
      return r;
    },
    explains: retentionExplains,
    effect: (w) => observed(w, w.ids.quarantinable, 'QUARANTINED'),
  },
  {
    name: 'retention PURGE',
    maintenance: true,
    run: async (w) => {
      const r = await new ArtifactRetention(w.ctx.items, w.ctx.content, { clock: w.ctx.clock }).run(
        await readEpoch(w.clean.items),
        'PURGE',
        retentionHost(w.ctx, w.ids.restore),
      );
      if (r.status === 'REFUSED') throw new Error(`retention PURGE refused: ${r.reason}`);
      return r;
    },
    explains: retentionExplains,
    effect: (w) => observed(w, w.ids.purgeable, 'PURGED'),
  },
  {
    name: 'read (verified)',
    reader: true,
    run: async (w) => {
      const { version: v, stream } = await openVersionContent(w.ctx, w.ids.namer, 1);
      const acc = new DigestAccumulator();
      for await (const c of stream) acc.update(c as Buffer);
      if (acc.digest() !== v.content_hash)
        throw new ReaderDeceived(`read ${acc.size} bytes hashing to ${acc.digest()}, not ${v.content_hash}`);
      return acc.size;
    },
    effect: async () => 'none',
  },
];

class ReaderDeceived extends Error {}

async function observed(w: World, keys: string[], state: string): Promise<Effect> {
  const root = contentRootId(w.clean.content.location);
  let n = 0;
  for (const k of keys)
    if ((await w.clean.items.get(observationKey(root, k, w.clean.layout.index_shards), { consistent: true }))?.state === state) n++;
  return n === 0 ? 'none' : n === keys.length ? 'full' : 'partial';
}

// ------------------------------------------------------------------------------------------------

export interface Point {
  store: StoreName;
  method: string;
  n: number;
  /** A key of the template world: the point is "the first call with this key" (stable across runs). */
  key?: string;
}

export interface CaseResult {
  op: string;
  kind: FaultKind;
  point: string;
  fired: boolean;
  outcome: 'ok' | 'error';
  code?: string;
  message?: string;
  clear: boolean;
  effect: Effect;
  fenceRecovered: boolean;
  retry: 'ok' | 'not needed' | string;
  problems: string[];
}

export function pointLabel(p: Point): string {
  return `${p.store}.${p.method}#${p.n}${p.key ? ` (${p.key.replace(/[0-9A-HJKMNP-TV-Z]{26}/g, '…')})` : ''}`;
}

function ruleFor(p: Point, kind: FaultKind): FaultRule {
  if (p.key) {
    const key = p.key;
    return { store: p.store, method: p.method, kind, when: (args) => args[0] === key };
  }
  return { store: p.store, method: p.method, call: p.n, kind };
}

/** Whether an error is one an operator or client can act on: a stable code and a message that says what failed. */
export function clarity(e: unknown): { code: string; message: string; clear: boolean } {
  const a = toAlpError(e);
  const programming =
    e instanceof TypeError ||
    e instanceof ReferenceError ||
    e instanceof SyntaxError ||
    e instanceof RangeError ||
    e instanceof ReaderDeceived ||
    (e as { code?: string })?.code === 'ERR_ASSERTION';
  const vague = a.message.trim() === '' || /\bundefined\b|\[object |is not a function|Cannot read prop/.test(a.message);
  return { code: a.code, message: a.message, clear: !programming && !vague };
}

async function digestOf(w: World, key: string): Promise<string> {
  const acc = new DigestAccumulator();
  for await (const c of await w.content.readRaw(key)) acc.update(c as Buffer);
  return acc.digest();
}

/** The checks that hold after any operation, faulted or not (faults off). */
async function consistency(w: World, problems: string[], allowFence: boolean): Promise<boolean> {
  let recovered = false;
  if (await readFence(w.clean)) {
    if (!allowFence) problems.push('the maintenance fence is held after a publisher operation');
    try {
      await advanceEpoch(w.clean.items, 'operator', 'fault matrix: maintenance failed', w.clean.clock.now().toISOString());
      await recoverMaintenance(w.clean, await readEpoch(w.clean.items), 'operator');
      recovered = true;
    } catch (e) {
      problems.push(`fence recovery failed: ${String((e as Error).message)}`);
      return recovered;
    }
  }
  const report = await reconcile(w.clean, { actor: 'operator' });
  if (report.status !== 'VERIFIED')
    problems.push(
      `reconcile FAILED: ${JSON.stringify(report.findings.filter((f) => f.kind !== 'derived' && f.kind !== 'unexpected').slice(0, 3))}`,
    );
  try {
    const { state } = await assertCountersMatchItems(w.clean.items);
    const audit = await auditItems(w.clean.items);
    if (audit.size !== (state.accepted as number) + (state.dropped as number)) problems.push('telemetry: audit items ≠ accepted + dropped');
  } catch (e) {
    problems.push(`telemetry: ${String((e as Error).message)}`);
  }
  for (const key of w.ids.referenced) if (!(await w.content.head(key))) problems.push(`referenced object ${key} is gone`);
  // Every object at a final key holds whole bytes: a body the world or the operation wrote (archive
  // copies repeat them), or a complete metadata snapshot or derived document.
  const known = new Set(w.ids.bodies);
  for await (const o of w.content.list('')) {
    if (o.key.endsWith('/metadata.json') || o.key.startsWith('provenance/')) {
      const text = fs.readFileSync(path.join(w.dir, 'content', o.key), 'utf8');
      try {
        JSON.parse(text);
        if (!text.endsWith('\n')) throw new Error('no final newline');
      } catch (e) {
        problems.push(`partial object at ${o.key}: ${String((e as Error).message)}`);
      }
    } else if (!known.has(await digestOf(w, o.key))) problems.push(`object ${o.key} holds bytes nothing wrote whole`);
  }
  return recovered;
}

/** A failed backup must not leave a directory with a final name that is not a registered, complete backup. */
async function backupTraces(w: World, problems: string[]): Promise<void> {
  const dir = path.join(w.dir, 'backups');
  if (!fs.existsSync(dir)) return;
  const registry = await listBackups(w.clean);
  for (const name of fs.readdirSync(dir)) {
    if (name.startsWith('.')) {
      problems.push(`a partial backup directory ${name} was left behind`);
      continue;
    }
    const rec = registry.find((b) => b.location === path.join(dir, name));
    if (rec?.status !== 'COMPLETE') problems.push(`backup directory ${name} exists but the registry says ${String(rec?.status)}`);
  }
}

export interface MatrixOptions {
  /** Working directory (default: a new temp directory). */
  base?: string;
  ops?: string[];
  kinds?: FaultKind[];
  /** At most this many call points per operation × fault kind, spread over the calls (default: all). */
  sample?: number;
  log?: (line: string) => void;
}

export interface MatrixReport {
  cases: CaseResult[];
  points: Record<string, number>;
  seconds: number;
}

export async function runMatrix(opts: MatrixOptions = {}): Promise<MatrixReport> {
  const started = performance.now();
  const base = opts.base ?? fs.mkdtempSync(path.join(os.tmpdir(), 'alp-faults-'));
  const work = path.join(base, 'work');
  const template = path.join(base, 'template');
  const ids = await buildTemplate(work, template);
  const stable = new Set<string>();
  for (const f of fs.readdirSync(path.join(template, 'content'), { recursive: true }) as string[])
    if (fs.statSync(path.join(template, 'content', f)).isFile()) stable.add(f.split(path.sep).join('/'));
  const kinds = opts.kinds ?? [...FAULT_KINDS];
  const cases: CaseResult[] = [];
  const pointsPerOp: Record<string, number> = {};
  for (const op of OPS.filter((o) => !opts.ops || opts.ops.includes(o.name))) {
    const trace = await recordTrace(op, template, work, ids);
    const points = pointsOf(trace, stable);
    pointsPerOp[op.name] = points.length;
    for (const kind of kinds) {
      let eligible = points.filter((p) => applicableKinds(p.store, p.method).includes(kind));
      if (opts.sample !== undefined && eligible.length > opts.sample) eligible = spread(eligible, opts.sample);
      for (const p of eligible) cases.push(await runCase(op, kind, p, template, work, ids));
    }
    opts.log?.(`# faults: ${op.name}: ${points.length} storage calls, ${cases.filter((c) => c.op === op.name).length} cases`);
  }
  fs.rmSync(base, { recursive: true, force: true });
  return { cases, points: pointsPerOp, seconds: (performance.now() - started) / 1000 };
}

function spread<T>(list: T[], n: number): T[] {
  if (n <= 1) return list.slice(0, 1);
  const out: T[] = [];
  for (let i = 0; i < n; i++) out.push(list[Math.round((i * (list.length - 1)) / (n - 1))] as T);
  return [...new Set(out)];
}

async function recordTrace(op: MatrixOp, template: string, work: string, ids: WorldIds): Promise<TracedCall[]> {
  const w = await openWorld(template, work, ids);
  try {
    const prepared = await op.prepare?.(w);
    w.plan.arm([]);
    await op.run(w, prepared, 1);
    w.plan.disarm();
    return w.plan.trace;
  } finally {
    await w.close();
  }
}

/** Call points: by key for objects of the template (stable), by call number otherwise. */
function pointsOf(trace: TracedCall[], stable: Set<string>): Point[] {
  const seenKeys = new Set<string>();
  const out: Point[] = [];
  for (const c of trace) {
    if (applicableKinds(c.store, c.method).length === 0) continue;
    if (c.store === 'content' && c.key && stable.has(c.key)) {
      const id = `${c.method} ${c.key}`;
      if (seenKeys.has(id)) continue;
      seenKeys.add(id);
      out.push({ store: c.store, method: c.method, n: c.n, key: c.key });
    } else out.push({ store: c.store, method: c.method, n: c.n });
  }
  return out;
}

async function runCase(op: MatrixOp, kind: FaultKind, p: Point, template: string, work: string, ids: WorldIds): Promise<CaseResult> {
  const w = await openWorld(template, work, ids);
  const problems: string[] = [];
  const result: CaseResult = {
    op: op.name,
    kind,
    point: pointLabel(p),
    fired: false,
    outcome: 'ok',
    clear: true,
    effect: 'none',
    fenceRecovered: false,
    retry: 'not needed',
    problems,
  };
  try {
    const prepared = await op.prepare?.(w);
    w.plan.arm([ruleFor(p, kind)]);
    let error: unknown;
    let value: unknown;
    try {
      value = await op.run(w, prepared, 1);
    } catch (e) {
      error = e;
    }
    result.fired = w.plan.fired.length > 0;
    w.plan.disarm();
    result.effect = await op.effect(w);
    if (error === undefined) {
      if (!op.reader && result.effect !== 'full' && !op.explains?.(value))
        problems.push(`reported success, but the effect is ${result.effect}`);
    } else {
      result.outcome = 'error';
      const c = clarity(error);
      Object.assign(result, { code: c.code, message: c.message.slice(0, 200), clear: c.clear });
      if (!c.clear) problems.push(`unclear error: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
      if (!result.fired) problems.push('failed although no fault was injected');
      if (result.effect === 'full' && kind !== 'TIMEOUT_AFTER' && !op.maintenance)
        problems.push(`reported failure (${c.code}), but the operation took effect`);
      if (result.effect === 'partial' && !op.maintenance) problems.push('reported failure and left a partial effect');
    }
    result.fenceRecovered = await consistency(w, problems, op.maintenance === true && error !== undefined);
    await backupTraces(w, problems);
    if (error !== undefined) {
      // The same operation again, without the fault.
      try {
        const again = await op.run(w, await (op.prepare?.(w) ?? Promise.resolve(undefined)), 2);
        result.retry = 'ok';
        // Journaled maintenance resumes where the failed attempt stopped: together they did it all.
        if (op.maintenance && (await op.effect(w)) !== 'full' && !op.explains?.(again))
          problems.push('the retry reported success, but the work is still not done');
      } catch (e) {
        const c = clarity(e);
        result.retry = `${c.code}: ${c.message.slice(0, 120)}`;
        const already = result.effect === 'full';
        if (!(already && e instanceof AlpError && ['CONFLICT', 'ILLEGAL_TRANSITION'].includes(e.code)))
          problems.push(`retry without the fault failed: ${c.code}: ${c.message}`);
      }
      const after: string[] = [];
      await consistency(w, after, op.maintenance === true);
      for (const a of after) problems.push(`after the retry: ${a}`);
    }
  } catch (e) {
    problems.push(`harness: ${e instanceof Error ? e.stack : String(e)}`);
  } finally {
    await w.close();
  }
  return result;
}

/** The table for the docs: one row per operation, one column per fault kind. */
export function matrixTable(cases: CaseResult[]): string {
  const ops = [...new Set(cases.map((c) => c.op))];
  const kinds = FAULT_KINDS.filter((k) => cases.some((c) => c.kind === k));
  const lines = [`| operation | ${kinds.join(' | ')} |`, `|---|${kinds.map(() => '---').join('|')}|`];
  for (const op of ops) {
    const cells = kinds.map((k) => {
      const mine = cases.filter((c) => c.op === op && c.kind === k);
      if (mine.length === 0) return '–';
      const ok = mine.filter((c) => c.outcome === 'ok').length;
      const codes = new Map<string, number>();
      for (const c of mine) if (c.outcome === 'error') codes.set(c.code as string, (codes.get(c.code as string) ?? 0) + 1);
      const bad = mine.filter((c) => c.problems.length > 0).length;
      const parts = [`${mine.length} pts`, ok ? `${ok} ok` : '', ...[...codes].map(([code, n]) => `${n} ${code}`)].filter(Boolean);
      return `${parts.join(', ')}${bad ? ` **${bad} FAIL**` : ' ✓'}`;
    });
    lines.push(`| ${op} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/** What the CLI prints and HTTP answers for each error code the matrix saw. */
export function codesTable(cases: CaseResult[]): string {
  const seen = new Map<string, string>();
  for (const c of cases)
    if (c.outcome === 'error' && c.code && !seen.has(`${c.code} ${c.kind}`)) seen.set(`${c.code} ${c.kind}`, c.message ?? '');
  const lines = ['| fault | code | exit | HTTP | example message (`alp: CODE: message`) |', '|---|---|---|---|---|'];
  for (const [k, msg] of [...seen].sort()) {
    const [code, kind] = k.split(' ') as [string, string];
    const err = new AlpError(code as never, '');
    lines.push(
      `| ${kind} | ${code} | ${err.exitCode} | ${err.httpStatus} | ${msg
        .replace(/\|/g, '\\|')
        .replace(/[0-9A-HJKMNP-TV-Z]{26}/g, '…')
        .slice(0, 110)} |`,
    );
  }
  return lines.join('\n');
}
