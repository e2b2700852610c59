/**
 * One process of the telemetry crash test: loops audit writes (writer) or claim/acknowledge (exporter)
 * on an embedded installation until it is killed with SIGKILL. Prints "ready" once its store is open.
 * argv: dbPath contentRoot role seed
 */
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { systemClock } from '../../src/core/clock.ts';
import { AlpError } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose, withdraw } from '../../src/lifecycle/transitions.ts';
import { createContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';

const [dbPath, contentRoot, role, seedText] = process.argv.slice(2) as [string, string, string, string];
let seed = Number(seedText) >>> 0 || 1;
const rand = (n: number) => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed % n;
};
const items = new SqliteItemStore(dbPath);
const content = await FsContentStore.open(contentRoot);
const ctx = createContext({ items, content, clock: systemClock });
const queue = await attachAuditSinks(ctx);
await queue.open();
const agent = { id: `crash-${role}`, kind: 'agent' as const };
process.stdout.write('ready\n');

// Expected refusals under concurrency (a lease lost to the other process, a busy artifact) are fine;
// anything else is a bug and ends the process with a non-zero code the parent reports.
const tolerate = (e: unknown) => {
  if (e instanceof AlpError && ['CONFLICT', 'ILLEGAL_TRANSITION', 'TRANSACTION_CONFLICT', 'THROTTLED'].includes(e.code)) return;
  throw e;
};

if (role === 'writer') {
  const ids: string[] = [];
  for (let i = 0; ; i++) {
    if (ids.length < 3 || rand(10) === 0) {
      const { version } = await createArtifact(ctx, agent, { name: `c${i}`, filename: 'f.sh', body: [Buffer.from(`echo ${i}\n`)] });
      ids.push(version.artifact_id);
    } else {
      const id = ids[rand(ids.length)] as string;
      await propose(ctx, agent, id, 1).catch(async (e: unknown) => {
        tolerate(e);
        await withdraw(ctx, agent, id, 1).catch(tolerate);
      });
    }
  }
} else {
  const owner = `exporter-${seedText}`;
  for (;;) {
    const batch = await queue
      .claim(1, owner, systemClock.now(), { maxRecords: 1 + rand(20), leaseMs: 5 + rand(40) })
      .catch((e: unknown) => {
        tolerate(e);
        return [];
      });
    for (const r of batch) {
      if (rand(4) === 0) continue; // never acknowledged: its lease expires, it is retried or exhausted
      await queue.acknowledge(1, owner, r.id, r.leaseToken, systemClock.now()).catch(tolerate);
    }
  }
}
