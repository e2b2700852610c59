/**
 * Regressions found by the HTTP fuzz (fuzz-requests.ts):
 * - an upload aborted by its client while the handler was still checking the request (here: a slow
 *   version-number reservation) made the request body emit 'error' before anything read it: an uncaught
 *   exception that ends `alp serve`; and every upload a client aborted was logged as an internal error;
 * - a request answered before its body arrived (a refusal, a 404) lost its answer to a connection reset;
 * - CONNECT got its socket closed without an answer, and an Expect other than 100-continue a bare 417
 *   without a problem document.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import type { TransactOp } from '../../src/store/item-store.ts';
import { type Harness, startApi } from '../helpers/api-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';
import { parse, send } from './fuzz-requests.ts';

function walk(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

describe('HTTP API: hostile transfers', () => {
  let h: Harness;
  let port: number;
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);
  before(async () => {
    h = await startApi();
    port = Number(new URL(h.url).port);
    process.on('uncaughtException', onUncaught);
  });
  after(async () => {
    process.off('uncaughtException', onUncaught);
    await h.close();
  });

  it('an upload aborted before the handler reads its body does not end the process, and leaves no temp file', async () => {
    const id = (await createArtifact(h.ctx, agent, { name: 'slow', filename: 's.sh', body: bytesOf('echo\n') })).version.artifact_id;
    // The version-number reservation (a transaction) takes 300 ms: the client aborts meanwhile.
    const items = h.ctx.items;
    const real = items.transactWrite.bind(items);
    items.transactWrite = (async (ops: TransactOp[], ...rest: unknown[]) => {
      await new Promise((r) => setTimeout(r, 300));
      return (real as (...a: unknown[]) => Promise<void>)(ops, ...rest);
    }) as typeof items.transactWrite;
    try {
      for (const chunked of [true, false]) {
        const head = [
          `POST /v1/artifacts/${id}/versions?filename=cut.bin HTTP/1.1`,
          'Host: 127.0.0.1',
          `Authorization: Bearer ${h.tokens.agent}`,
          'Content-Type: application/octet-stream',
          chunked ? 'Transfer-Encoding: chunked' : 'Content-Length: 100000',
          '',
          '',
        ].join('\r\n');
        const body = chunked ? Buffer.concat([Buffer.from('ffff\r\n'), Buffer.alloc(4096, 0x61)]) : Buffer.alloc(4096, 0x61);
        await send(port, Buffer.concat([Buffer.from(head), body]), { cut: true, cutMs: 50 });
        await new Promise((r) => setTimeout(r, 600));
      }
    } finally {
      items.transactWrite = real;
    }
    assert.deepEqual(uncaught, [], 'no uncaught exception');
    // A client that goes away is not a server fault: nothing logged as an internal error.
    const errors = h.logs.filter((l) => typeof l.level === 'number' && l.level >= 50);
    assert.deepEqual(errors, [], 'no error-level log line');
    assert.ok(
      h.logs.some((l) => l.status === 'aborted'),
      'the aborted request is logged as aborted',
    );
    assert.equal((await h.call('GET', '/healthz')).status, 200);
    assert.deepEqual(
      walk(h.ctx.contentRoot).filter((f) => path.basename(f).startsWith('.alp-')),
      [],
      'no temp file left',
    );
  });

  it('a request answered before its body arrived gets its answer, not a connection reset (lingering close)', async () => {
    // The client sends its head and a first part, sends the rest once the answer was written, and reads
    // only then. A server that closed right after answering resets the connection when the rest
    // arrives, and the reset erases the answer from the client's buffer (RFC 9112 §9.6).
    const body = Buffer.alloc(1100 * 1024, 0x7b);
    const requests = [
      ['TRACE', '/v1/%3A%5E'],
      ['POST', '/metrics'],
      ['GET', '/v1/artifacts'],
      ['PUT', '/v1/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV/provenance'],
      ['POST', '/v1/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV/approvals'],
    ] as const;
    const statuses: number[] = [];
    for (const [method, target] of requests) {
      const head = [
        `${method} ${target} HTTP/1.1`,
        'Host: 127.0.0.1',
        `Authorization: Bearer ${h.tokens.human}`,
        'Content-Type: application/json',
        `Content-Length: ${body.length}`,
        'Connection: close',
        '',
        '',
      ].join('\r\n');
      const answer = await new Promise<Buffer>((resolve) => {
        const socket = net.connect(port, '127.0.0.1');
        const chunks: Buffer[] = [];
        socket.pause();
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('error', () => {});
        socket.on('close', () => resolve(Buffer.concat(chunks)));
        socket.write(Buffer.concat([Buffer.from(head, 'latin1'), body.subarray(0, 64 * 1024)]));
        setTimeout(() => socket.write(body.subarray(64 * 1024), () => {}), 200);
        setTimeout(() => socket.resume(), 400);
      });
      const res = parse(answer, method);
      assert.ok(res, `${method} ${target}: no HTTP response (${answer.length} bytes)`);
      assert.ok(res.status >= 200 && res.status < 500, `${method} ${target}: ${res.status}`);
      statuses.push(res.status);
    }
    assert.equal(statuses.length, requests.length);
  });

  it('CONNECT and unknown expectations are answered with problem documents', async () => {
    const connect = parse(await send(port, Buffer.from('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\nhello')), 'CONNECT');
    assert.equal(connect?.status, 405);
    assert.equal(connect?.headers['content-type'], 'application/problem+json');
    assert.equal(JSON.parse(connect?.body.toString() ?? '').code, 'INVALID');
    const expect = parse(
      await send(port, Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nConnection: close\r\n\r\n')),
      'GET',
    );
    assert.equal(expect?.status, 417);
    assert.equal(expect?.headers['content-type'], 'application/problem+json');
    assert.equal(JSON.parse(expect?.body.toString() ?? '').status, 417);
  });
});
