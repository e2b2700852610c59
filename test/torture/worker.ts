/**
 * One process of the crash campaign (scripts/torture.ts, test/torture/campaign.ts). It opens an
 * installation from storage URLs, runs a seeded random workload through the library services —
 * creates, versions, proposals, approvals, executions with streamed outputs, compensations,
 * provenance, archives, telemetry claim/ack, backups, retention QUARANTINE/PURGE — and appends every
 * operation that RETURNED success to the fsynced "acknowledged" journal before moving on. The parent
 * SIGKILLs it at a random moment, or tells it to SIGKILL itself at the n-th storage call of a kind.
 *
 * stdout protocol (one line each): OPENING, READY, `@{op}` before each operation, `~{event}` around
 * storage calls (p/P put, t/T transaction, d/D delete, c/C copy, s/S snapshot), `#conflict {msg}` for
 * tolerated refusals, DONE at a clean end. An unexpected error prints `FAIL {json}` on stderr, exit 3.
 * argv[2]: JSON WorkerOptions.
 */
import { Readable } from 'node:stream';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { Body, ContentStore } from '../../src/content/content-store.ts';
import { openContentStore } from '../../src/content/open.ts';
import type { Clock } from '../../src/core/clock.ts';
import { parseContentUrl, parseMetadataUrl } from '../../src/core/config.ts';
import { AlpError } from '../../src/core/errors.ts';
import { HEAD_SK } from '../../src/core/keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact, openVersionContent } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { type ExecutionItem, finishExecution, listExecutions, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import type { HeadItem, Principal, VersionItem } from '../../src/lifecycle/model.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { SETTLED_STATES } from '../../src/lifecycle/state-machine.ts';
import { propose, withdraw } from '../../src/lifecycle/transitions.ts';
import { listVersions } from '../../src/lifecycle/versions.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { localTrustedHost } from '../../src/retention/host.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { createContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import { openItemStore } from '../../src/store/open.ts';
import { readEpoch } from '../../src/system/state.ts';
import { type Ack, JournalWriter } from './journal.ts';
import { rng, seededBytes } from './rng.ts';

export type KillTarget = 'tx' | 'put' | 'put-mid' | 'delete' | 'update' | 'copy' | 'snapshot';

export interface WorkerOptions {
  metadata: string;
  content: string;
  /** The campaign's clock for this run (the parent moves it forward between runs). */
  now: string;
  seed: number;
  run: number;
  journal: string;
  /** The verified same-installation restore retention approvals point to. */
  restore: string;
  /** Where backups go. */
  backups: string;
  maxOps: number;
  /** SIGKILL itself at the n-th call of this kind, before or after it reaches the store. */
  selfKill?: { target: KillTarget; n: number; when: 'before' | 'after' };
}

const o = JSON.parse(process.argv[2] as string) as WorkerOptions;
const r = rng(o.seed);
const say = (line: string) => process.stdout.write(`${line}\n`);

/** Each reading moves time by one millisecond: deterministic, monotonic, never reused across runs. */
class TickClock implements Clock {
  private ms: number;
  constructor(start: string) {
    this.ms = Date.parse(start);
  }
  now(): Date {
    return new Date(this.ms++);
  }
}

const die = () => process.kill(process.pid, 'SIGKILL');
const counts = new Map<KillTarget, number>();
/** Counts a call of `kind` and dies here when it is the chosen one ('before'). Returns whether to die after. */
function tick(kind: KillTarget): boolean {
  const n = (counts.get(kind) ?? 0) + 1;
  counts.set(kind, n);
  if (o.selfKill?.target !== kind || o.selfKill.n !== n) return false;
  if (o.selfKill.when === 'before') die();
  return true;
}

/** The stores, with markers around every storage call and the self-kill points. */
function probeItems(inner: ItemStore): ItemStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      const kind: KillTarget | undefined =
        prop === 'transactWrite' ? 'tx' : prop === 'update' || prop === 'put' || prop === 'delete' ? 'update' : undefined;
      const mark = prop === 'snapshot' ? 's' : kind === 'tx' ? 't' : undefined;
      return async (...args: unknown[]) => {
        const after = prop === 'snapshot' ? tick('snapshot') : kind ? tick(kind) : false;
        if (mark) say(`~${mark}`);
        const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (mark) say(`~${mark.toUpperCase()}`);
        if (after) die();
        return result;
      };
    },
  });
}

function probeContent(inner: ContentStore): ContentStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (prop === 'put') {
        return async (key: string, body: Body, opts?: unknown) => {
          const after = tick('put');
          let feed = body;
          if (o.selfKill?.target === 'put-mid' && tick('put-mid')) {
            // Dies between two chunks of this upload's stream.
            const chunks = o.selfKill.n;
            feed = (async function* () {
              let i = 0;
              for await (const c of body as AsyncIterable<Uint8Array>) {
                if (++i > Math.max(1, chunks % 5)) die();
                yield c;
              }
              die();
            })();
          }
          say('~p');
          const result = await (value as ContentStore['put']).call(target, key, feed, opts as never);
          say('~P');
          if (after) die();
          return result;
        };
      }
      const kind: KillTarget | undefined = prop === 'delete' ? 'delete' : prop === 'copy' ? 'copy' : undefined;
      if (!kind) return (value as (...a: unknown[]) => unknown).bind(target);
      return async (...args: unknown[]) => {
        const after = tick(kind);
        say(`~${kind[0]}`);
        const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        say(`~${(kind[0] as string).toUpperCase()}`);
        if (after) die();
        return result;
      };
    },
  });
}

say('OPENING');
const clock = new TickClock(o.now);
const items = probeItems(await openItemStore(parseMetadataUrl(o.metadata)));
const content = probeContent(await openContentStore(parseContentUrl(o.content)));
const ctx = createContext({ items, content, clock });
const queue = await attachAuditSinks(ctx);
const journal = new JournalWriter(o.journal, o.run);

const agent: Principal = { id: 'agent', kind: 'agent' };
const humans: Principal[] = [
  { id: 'alice', kind: 'human' },
  { id: 'bob', kind: 'human' },
];
const operator: Principal = { id: 'os:torture', kind: 'human' };

interface Art {
  head: HeadItem;
  versions: VersionItem[];
  execs: ExecutionItem[];
}
const model = new Map<string, Art>();

async function refresh(id: string): Promise<void> {
  const head = (await items.get({ PK: `ART#${id}`, SK: HEAD_SK }, { consistent: true })) as HeadItem | undefined;
  if (!head) return;
  model.set(id, { head, versions: await listVersions(items, id), execs: await listExecutions(ctx, id) });
}

// The installation as the previous runs left it.
{
  let cursor: string | undefined;
  const ids = new Set<string>();
  do {
    const page = await items.scan(cursor ? { cursor } : {});
    for (const i of page.items) if (i.SK === HEAD_SK && i.type === 'head') ids.add(i.artifact_id as string);
    cursor = page.cursor;
  } while (cursor);
  for (const id of ids) await refresh(id);
}
say('READY');

/** A streamed body: a few KiB usually, up to a few MiB sometimes; now and then it names another object's digest. */
function body(): { body: Body; size: number } {
  const roll = r.next();
  const size = roll < 0.7 ? r.range(1, 8 * 1024) : roll < 0.95 ? r.range(8 * 1024, 256 * 1024) : r.range(256 * 1024, 3 * 1024 * 1024);
  const seed = r.seed();
  const known = [...model.values()].flatMap((a) => a.versions.map((v) => v.content_hash));
  const trailer = known.length && r.chance(0.15) ? Buffer.from(`\nsee ${r.pick(known)}\n`) : undefined;
  const slow = r.chance(0.2);
  async function* gen() {
    for (const chunk of seededBytes(seed, size)) {
      yield chunk;
      // Some uploads trickle, so that a timed kill can land in the middle of one.
      if (slow) await yieldToLoop();
    }
    if (trailer) yield trailer;
  }
  return { body: r.chance(0.5) ? gen() : Readable.from(gen()), size: size + (trailer?.length ?? 0) };
}

const all = () => [...model.values()];
const live = () => all().filter((a) => !a.head.archived);
const versionsIn = (states: string[]) => live().flatMap((a) => a.versions.filter((v) => states.includes(v.state)).map((v) => ({ a, v })));
const running = () =>
  live().flatMap((a) =>
    a.execs
      .filter((x) => x.status === 'RUNNING')
      .map((x) => ({ a, x, missing: ['output.json', 'stdout.log', 'stderr.log'].filter((n) => !x.outputs[n]) })),
  );

type Op = () => Promise<Ack[]>;

function choose(opNo: number): [string, Op] | undefined {
  const drafts = versionsIn(['DRAFT']);
  const proposed = versionsIn(['PROPOSED']);
  const approved = versionsIn(['APPROVED']);
  const runs = running();
  const uploadable = runs.filter((x) => x.missing.length > 0);
  const compensable = versionsIn(['EXECUTED', 'FAILED']).filter(({ a }) => !a.head.compensates);
  const archivable = live().filter((a) => a.versions.length > 0 && a.versions.every((v) => SETTLED_STATES.includes(v.state)));
  const plain = live().filter((a) => !a.head.compensates);
  const ops: Array<readonly [[string, Op], number]> = [
    [['create', opCreate(opNo)], model.size < 4 ? 6 : 2.5],
    [['version', () => opVersion(r.pick(plain))], plain.length ? 1.5 : 0],
    [['propose', () => opPropose(r.pick(drafts))], drafts.length ? 3 : 0],
    [['withdraw', () => opWithdraw(r.pick(proposed))], proposed.length ? 0.4 : 0],
    [['approve', () => opDecide(r.pick(proposed), 'APPROVE')], proposed.length ? 3 : 0],
    [['reject', () => opDecide(r.pick(proposed), 'REJECT')], proposed.length ? 0.4 : 0],
    [['start', () => opStart(r.pick(approved))], approved.length ? 2.5 : 0],
    [['upload', () => opUpload(r.pick(uploadable))], uploadable.length ? 3 : 0],
    [['finish', () => opFinish(r.pick(runs))], runs.length ? 1.5 : 0],
    [['compensate', () => opCompensate(r.pick(compensable), opNo)], compensable.length ? 0.8 : 0],
    [['provenance', () => opProvenance(r.pick(live()))], live().length ? 0.8 : 0],
    [['archive', () => opArchive(r.pick(archivable))], archivable.length ? 0.6 : 0],
    [['read', () => opRead()], all().length ? 0.8 : 0],
    [['claim', () => opClaim()], 0.8],
    [['backup', () => opBackup(opNo)], 0.25],
    [['quarantine', () => opRetention('QUARANTINE')], 0.3],
    [['purge', () => opRetention('PURGE')], 0.3],
  ];
  return r.weighted(ops);
}

function versionAck(op: 'create' | 'version', v: VersionItem): Ack {
  return {
    op,
    artifact_id: v.artifact_id,
    version: v.version,
    content_key: v.content_key,
    content_hash: v.content_hash,
    size: v.size,
    metadata_key: v.metadata_key,
    metadata_hash: v.metadata_hash,
  };
}

function opCreate(opNo: number): Op {
  return async () => {
    const b = body();
    const { version } = await createArtifact(ctx, agent, {
      name: `t${o.run}-${opNo}`,
      filename: r.pick(['run.sh', 'model.bin', 'report.json']),
      kind: r.pick(['script', 'file', 'config']),
      quorum: r.chance(0.2) ? 2 : 1,
      body: b.body,
    });
    await refresh(version.artifact_id);
    return [versionAck('create', version)];
  };
}

async function opVersion(a: Art): Promise<Ack[]> {
  const v = await addVersion(ctx, agent, a.head.artifact_id, { filename: 'run.sh', ...body() });
  await refresh(a.head.artifact_id);
  return [versionAck('version', v)];
}

async function opPropose({ a, v }: { a: Art; v: VersionItem }): Promise<Ack[]> {
  await propose(ctx, agent, a.head.artifact_id, v.version, 'torture');
  await refresh(a.head.artifact_id);
  return [{ op: 'transition', artifact_id: a.head.artifact_id, version: v.version, to: 'PROPOSED' }];
}

async function opWithdraw({ a, v }: { a: Art; v: VersionItem }): Promise<Ack[]> {
  await withdraw(ctx, agent, a.head.artifact_id, v.version);
  await refresh(a.head.artifact_id);
  return [{ op: 'transition', artifact_id: a.head.artifact_id, version: v.version, to: 'DRAFT' }];
}

async function opDecide({ a, v }: { a: Art; v: VersionItem }, decision: 'APPROVE' | 'REJECT'): Promise<Ack[]> {
  const actor = r.pick(humans);
  const res = await decide(ctx, actor, a.head.artifact_id, v.version, { decision, evidenceRef: `CR-${o.run}` });
  const acks: Ack[] = [{ op: 'approval', artifact_id: a.head.artifact_id, version: v.version, decision, actor: actor.id }];
  if (res.version.state !== 'PROPOSED')
    acks.push({ op: 'transition', artifact_id: a.head.artifact_id, version: v.version, to: res.version.state });
  await refresh(a.head.artifact_id);
  if (a.head.compensates) await refresh(a.head.compensates.artifact_id);
  return acks;
}

async function opStart({ a, v }: { a: Art; v: VersionItem }): Promise<Ack[]> {
  const x = await startExecution(ctx, agent, a.head.artifact_id, v.version);
  await refresh(a.head.artifact_id);
  return [
    { op: 'execution', run_id: x.run_id, artifact_id: a.head.artifact_id, version: v.version },
    { op: 'transition', artifact_id: a.head.artifact_id, version: v.version, to: 'EXECUTING' },
  ];
}

async function opUpload({ a, x, missing }: { a: Art; x: ExecutionItem; missing: string[] }): Promise<Ack[]> {
  const name = r.pick(missing);
  const out = await uploadOutput(ctx, agent, x.run_id, name, body().body);
  await refresh(a.head.artifact_id);
  return [{ op: 'output', run_id: x.run_id, name, key: out.key, digest: out.digest, size: out.size }];
}

async function opFinish({ a, x }: { a: Art; x: ExecutionItem }): Promise<Ack[]> {
  const status = r.chance(0.7) ? 'SUCCEEDED' : 'FAILED';
  const exitCode = status === 'SUCCEEDED' ? 0 : r.range(1, 9);
  await finishExecution(ctx, agent, x.run_id, { status, exitCode });
  await refresh(a.head.artifact_id);
  if (a.head.compensates) await refresh(a.head.compensates.artifact_id);
  return [
    { op: 'finish', run_id: x.run_id, status, exit_code: exitCode },
    { op: 'transition', artifact_id: a.head.artifact_id, version: x.version, to: status === 'SUCCEEDED' ? 'EXECUTED' : 'FAILED' },
  ];
}

async function opCompensate({ a, v }: { a: Art; v: VersionItem }, opNo: number): Promise<Ack[]> {
  const res = await compensate(ctx, agent, a.head.artifact_id, v.version, { filename: `undo-${o.run}-${opNo}.sh`, ...body() });
  await refresh(a.head.artifact_id);
  await refresh(res.compensation.artifact_id);
  return [
    {
      op: 'compensation',
      artifact_id: a.head.artifact_id,
      version: v.version,
      comp_id: res.compensation.artifact_id,
      content_key: res.version.content_key,
      content_hash: res.version.content_hash,
      size: res.version.size,
    },
    versionAck('create', res.version),
    { op: 'transition', artifact_id: a.head.artifact_id, version: v.version, to: 'COMPENSATING' },
  ];
}

async function opProvenance(a: Art): Promise<Ack[]> {
  const inputs = a.versions.slice(0, 3).map((v) => v.content_hash);
  const step = await addProvenance(ctx, agent, a.head.artifact_id, { action: 'generate', inputs, model: 'model-t', tool: 'torture' });
  await refresh(a.head.artifact_id);
  return [{ op: 'provenance', artifact_id: a.head.artifact_id, step: step.step as number, hash: step.hash as string }];
}

async function opArchive(a: Art): Promise<Ack[]> {
  const { archived } = await archiveArtifact(ctx, humans[0] as Principal, a.head.artifact_id);
  await refresh(a.head.artifact_id);
  return [
    {
      op: 'archive',
      artifact_id: a.head.artifact_id,
      objects: archived.map((x) => ({ archive_key: x.archive_key, digest: x.digest, size: x.size })),
    },
    ...a.versions.map((v) => ({ op: 'transition' as const, artifact_id: a.head.artifact_id, version: v.version, to: 'ARCHIVED' })),
  ];
}

/** A verified read of a random version: a mismatch here would be a reader seeing wrong bytes. */
async function opRead(): Promise<Ack[]> {
  const a = r.pick(all());
  const v = a.versions.length ? r.pick(a.versions) : undefined;
  if (!v) return [];
  const { stream } = await openVersionContent(ctx, a.head.artifact_id, v.version);
  let n = 0;
  for await (const c of stream) n += (c as Buffer).length;
  if (n !== v.size) throw new Error(`read ${n} bytes of ${a.head.artifact_id} v${v.version}, recorded ${v.size}`);
  return [];
}

async function opClaim(): Promise<Ack[]> {
  const epoch = await readEpoch(items);
  const batch = await queue.claim(epoch, 'torture-exporter', clock.now(), { maxRecords: r.range(1, 60), leaseMs: 60_000 });
  const chosen = batch.filter(() => r.chance(0.85));
  if (chosen.length === 0) return [];
  const results = await queue.acknowledgeAll(
    epoch,
    'torture-exporter',
    chosen.map((c) => ({ id: c.id, leaseToken: c.leaseToken })),
    clock.now(),
  );
  const ids = results.filter((x) => x.acknowledged).map((x) => x.id);
  return ids.length ? [{ op: 'ack', ids }] : [];
}

async function opBackup(opNo: number): Promise<Ack[]> {
  const withContent = r.chance(0.3);
  const res = await createBackup(ctx, { out: `${o.backups}/b${o.run}-${opNo}`, withContent, actor: operator.id, concurrency: 1 });
  return [
    {
      op: 'backup',
      backup_id: res.backup_id,
      location: res.location,
      manifest_digest: res.manifest.manifest_digest,
      with_content: withContent,
      objects: res.manifest.objects.count,
    },
  ];
}

async function opRetention(action: 'QUARANTINE' | 'PURGE'): Promise<Ack[]> {
  const host = localTrustedHost(ctx, {
    owner: `retention torture run ${o.run}`,
    approver: operator,
    evidenceRef: `CHG-T${o.run}`,
    restore: o.restore,
    holdOnFailure: true,
  });
  const res = await new ArtifactRetention(items, content, { clock }).run(await readEpoch(items), action, host, { maxArtifacts: 200 });
  if (res.status === 'REFUSED') throw new Error(`retention ${action} refused: ${res.reason}`);
  return [{ op: 'retention', action, status: res.status, quarantined: res.quarantined, purged: res.purged }];
}

const TOLERATED = new Set(['CONFLICT', 'ILLEGAL_TRANSITION']);

for (let opNo = 1; opNo <= o.maxOps; opNo++) {
  const choice = choose(opNo);
  if (!choice) break;
  const [name, op] = choice;
  say(`@${name}`);
  let acks: Ack[];
  try {
    acks = await op();
  } catch (e) {
    if (e instanceof AlpError && TOLERATED.has(e.code)) {
      say(
        `#conflict ${name}: ${e.message
          .replace(/[0-9A-HJKMNP-TV-Z]{26}/g, 'ID')
          .replace(/\d+/g, 'N')
          .slice(0, 90)}`,
      );
      continue;
    }
    process.stderr.write(
      `FAIL ${JSON.stringify({ op: name, run: o.run, opNo, code: (e as AlpError).code, message: String((e as Error).message ?? e), stack: (e as Error).stack })}\n`,
    );
    process.exit(3);
  }
  for (const ack of acks) journal.append(ack);
}
journal.close();
say('DONE');
await content.close();
await items.close();
