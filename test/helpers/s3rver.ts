/**
 * Starts s3rver 3.7.1 in a child Node process on 127.0.0.1 (a port the OS picks), with a fresh temp
 * directory and one bucket. No mocks: the S3 engine runs against a real HTTP S3 implementation.
 *
 * Two things about s3rver 3.7.1 the harness takes care of (see /work/shared/ENVIRONMENT.md):
 * - the child runs with --openssl-legacy-provider: s3rver encrypts continuation tokens with DES, and
 *   without the legacy provider a paginated ListObjectsV2 answers 500;
 * - s3rver walks its directory tree depth-first in file-name order, so `a/b` is listed before `a-c`
 *   although S3 lists keys in UTF-8 byte order (`a-c` < `a/b`), and a paginated listing then skips keys.
 *   The child replaces s3rver's directory walker with one that visits entries in key order (a directory
 *   sorts as "name/", an object file as its key), so listings are ordered as real S3 orders them.
 * If the server cannot start, startS3rver rejects with a clear message and the suite fails.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { tempDir } from './tmp.ts';

export interface S3rverHandle {
  endpoint: string;
  bucket: string;
  region: string;
  /** s3rver's one account (it checks signatures). */
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** Where s3rver keeps its files. */
  directory: string;
  /** A plain S3 client for the server, configured as the engine's (path style, checksums when required). */
  client(): S3Client;
  /** Overwrites the bytes stored under the full S3 key behind ALP's back, with a plain PutObject. */
  corrupt(fullKey: string, bytes: Buffer): Promise<void>;
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 30_000;
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

// Runs in the child (CommonJS, cwd = the repository root so require finds s3rver).
const CHILD_SCRIPT = `
'use strict';
const fs = require('fs');
const path = require('path');
const utils = require('s3rver/lib/utils');
const SUFFIX = /\\._S3rver_[^/]*$/;
function sortKey(entry) {
  return Buffer.from(entry.isDirectory() ? entry.name + '/' : entry.name.replace(SUFFIX, ''), 'utf8');
}
utils.walk = function* walk(dir, recurseFilter) {
  const entries = fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => Buffer.compare(sortKey(a), sortKey(b)));
  for (const entry of entries) {
    const filePath = path.posix.join(dir, entry.name);
    if (!entry.isDirectory()) yield filePath;
    else if (!recurseFilter || recurseFilter(filePath)) yield* walk(filePath, recurseFilter);
  }
};
const S3rver = require('s3rver');
const [directory, bucket] = process.argv.slice(-2);
const server = new S3rver({ address: '127.0.0.1', port: 0, directory, silent: true, configureBuckets: [{ name: bucket }] });
server.run().then(
  (address) => process.stdout.write('S3RVER_LISTENING ' + address.port + '\\n'),
  (err) => { process.stderr.write('s3rver failed: ' + (err && err.stack || err) + '\\n'); process.exit(1); },
);
// Exit with the parent: stdin is a pipe from it.
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
`;

export async function startS3rver(): Promise<S3rverHandle> {
  const directory = tempDir('alp-s3rver');
  const bucket = `alp-test-${randomUUID().slice(0, 8)}`;
  const root = path.resolve(import.meta.dirname, '../..');
  const child = spawn(process.execPath, ['--openssl-legacy-provider', '-e', CHILD_SCRIPT, '--', directory, bucket], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  running.add(child);
  let output = '';
  child.stderr?.on('data', (b: Buffer) => {
    output = (output + b.toString('utf8')).slice(-4000);
  });
  const exitPromise = new Promise<void>((resolve) => {
    child.on('exit', () => {
      running.delete(child);
      resolve();
    });
  });
  const port = await new Promise<number>((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`s3rver did not start within ${START_TIMEOUT_MS} ms. Output:\n${stdout}\n${output}`));
    }, START_TIMEOUT_MS);
    child.stdout?.on('data', (b: Buffer) => {
      stdout += b.toString('utf8');
      const m = /S3RVER_LISTENING (\d+)/.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start s3rver: ${e.message}`));
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`s3rver exited with ${signal ?? `code ${code}`} before listening. Output:\n${stdout}\n${output}`));
    });
  });

  const endpoint = `http://127.0.0.1:${port}`;
  const region = 'us-east-1';
  const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
  const client = () =>
    new S3Client({
      endpoint,
      region,
      credentials,
      forcePathStyle: true,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  const raw = client();
  return {
    endpoint,
    bucket,
    region,
    credentials,
    directory,
    client,
    async corrupt(fullKey, bytes) {
      await raw.send(new PutObjectCommand({ Bucket: bucket, Key: fullKey, Body: bytes }));
    },
    async stop() {
      raw.destroy();
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exitPromise;
      clearTimeout(timer);
    },
  };
}
