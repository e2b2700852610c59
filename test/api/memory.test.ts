/**
 * Uploads are streamed, never buffered: 512 MiB through the API to a server in its own process, whose
 * resident memory is sampled (/proc/PID/status VmRSS) the whole time; it may grow by less than 64 MiB.
 * The verified download of the same bytes is sampled too.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tempDir } from '../helpers/tmp.ts';
import { type ServerProcess, startServerProcess } from './server-process.ts';

const MiB = 1024 * 1024;
const TOTAL = 512 * MiB;
const LIMIT = 64 * MiB;

function rssBytes(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  if (!kb) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb) * 1024;
}

/** Samples the RSS every 10 ms while `fn` runs; returns the peak and fn's result. */
async function sampled<T>(pid: number, fn: () => Promise<T>): Promise<{ peak: number; samples: number; value: T }> {
  let peak = rssBytes(pid);
  let samples = 1;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssBytes(pid));
      samples++;
    } catch {
      // the process ended
    }
  }, 10);
  try {
    const value = await fn();
    peak = Math.max(peak, rssBytes(pid));
    return { peak, samples, value };
  } finally {
    clearInterval(timer);
  }
}

function upload(url: string, token: string, total: number): Promise<{ status: number; body: string; digest: string }> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    const req = http.request(url, {
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', 'content-length': String(total) },
    });
    const chunk = Buffer.alloc(MiB);
    let sent = 0;
    const pump = () => {
      while (sent < total) {
        // Different bytes in every chunk (so nothing can be deduplicated or compressed away).
        chunk.writeUInt32BE(sent / MiB, 0);
        chunk.fill(sent & 0xff, 4, 64);
        hash.update(chunk);
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString(), digest: `sha256:${hash.digest('hex')}` }),
      );
    });
    req.on('error', reject);
    pump();
  });
}

function download(url: string, token: string): Promise<{ status: number; bytes: number; digest: string; complete: boolean }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
        const hash = createHash('sha256');
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          hash.update(c);
        });
        res.on('close', () =>
          resolve({ status: res.statusCode ?? 0, bytes, digest: `sha256:${hash.digest('hex')}`, complete: res.complete }),
        );
      })
      .on('error', reject);
  });
}

describe('HTTP API: memory stays flat while streaming', () => {
  let server: ServerProcess;
  let agentToken: string;
  before(async () => {
    server = await startServerProcess(path.join(tempDir('alp-mem'), 'data'), ['--max-upload-bytes', String(TOTAL), '--log-level', 'warn']);
    agentToken = server.status.tokens.find((t) => t.kind === 'agent')?.token as string;
    // Warm up: the first upload and download load the code paths and allocate the pools.
    const warm = await upload(`${server.url}/v1/artifacts?name=warm&filename=w.bin`, agentToken, 16 * MiB);
    assert.equal(warm.status, 201, warm.body);
    const id = JSON.parse(warm.body).artifact_id;
    assert.equal((await download(`${server.url}/v1/artifacts/${id}/versions/1/content`, agentToken)).status, 200);
  });
  after(async () => {
    await server.stop();
  });

  it(`uploads and downloads 512 MiB while the server's RSS grows by less than 64 MiB`, async (t) => {
    const baseline = rssBytes(server.pid);
    const up = await sampled(server.pid, () => upload(`${server.url}/v1/artifacts?name=big&filename=big.bin`, agentToken, TOTAL));
    assert.equal(up.value.status, 201, up.value.body);
    const created = JSON.parse(up.value.body);
    assert.equal(created.size, TOTAL);
    assert.equal(created.content_hash, up.value.digest);
    const upGrowth = up.peak - baseline;
    t.diagnostic(
      `upload: baseline ${(baseline / MiB).toFixed(1)} MiB, peak ${(up.peak / MiB).toFixed(1)} MiB, growth ${(upGrowth / MiB).toFixed(1)} MiB over ${up.samples} samples`,
    );
    assert.ok(up.samples > 20, 'sampled throughout the upload');
    assert.ok(upGrowth < LIMIT, `upload grew the RSS by ${(upGrowth / MiB).toFixed(1)} MiB`);

    const down = await sampled(server.pid, () =>
      download(`${server.url}/v1/artifacts/${created.artifact_id}/versions/1/content`, agentToken),
    );
    assert.equal(down.value.status, 200);
    assert.equal(down.value.complete, true);
    assert.equal(down.value.bytes, TOTAL);
    assert.equal(down.value.digest, up.value.digest);
    const downGrowth = down.peak - baseline;
    t.diagnostic(
      `download: peak ${(down.peak / MiB).toFixed(1)} MiB, growth ${(downGrowth / MiB).toFixed(1)} MiB over ${down.samples} samples`,
    );
    assert.ok(downGrowth < LIMIT, `download grew the RSS by ${(downGrowth / MiB).toFixed(1)} MiB`);
  });
});
