/**
 * Downloads through `alp/client` are refused unless their bytes match (issue 19 A2, I3 on the
 * client's side): a stored object corrupted on disk (bytes flipped in the content directory) ends in
 * an IntegrityError — the server's 502 problem for a small object, an aborted body for a large one,
 * which the client refuses rather than hand over short; and bytes corrupted on the way by a loopback
 * proxy (headers untouched, so only the client's own re-hash can notice) are refused client-side,
 * the Node stream erroring before it delivered every byte and no file appearing.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { HttpIntegrityError, IntegrityError } from '../../src/client/index.ts';
import { createNodeClient, saveToFile, toNodeReadable } from '../../src/client/node.ts';
import { sha256 } from '../../src/core/digest.ts';
import { type Harness, startApi } from '../helpers/api-harness.ts';
import { tempDir } from '../helpers/tmp.ts';
import { type LoopbackProxy, startProxy } from './proxy.ts';

/** Reads a Node stream to its end or its error; returns what it delivered and how it ended. */
async function drain(stream: NodeJS.ReadableStream): Promise<{ bytes: number; error: unknown }> {
  let bytes = 0;
  try {
    for await (const chunk of stream) bytes += (chunk as Buffer).length;
    return { bytes, error: undefined };
  } catch (error) {
    return { bytes, error };
  }
}

describe('alp/client refuses bytes that do not match their digest', () => {
  let h: Harness;
  let proxy: LoopbackProxy;
  const big = Buffer.alloc(4 * 1024 * 1024 + 3);
  for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
  before(async () => {
    h = await startApi();
    proxy = await startProxy(h.url);
  });
  after(async () => {
    await proxy.close();
    await h.close();
  });

  const flip = async (id: string, at: (size: number) => number) => {
    const v = await createNodeClient({ url: h.url, token: h.tokens.service }).showVersion(id, 1);
    const file = path.join(h.ctx.contentRoot, v.content_key as string);
    const bytes = fs.readFileSync(file);
    const i = at(bytes.length);
    bytes[i] = ((bytes[i] as number) + 1) % 256;
    fs.writeFileSync(file, bytes);
  };

  it('a corrupted stored object: IntegrityError, never the bytes (small: the 502 problem; large: the aborted body)', async () => {
    const agent = createNodeClient({ url: h.url, token: h.tokens.agent });
    const small = await agent.createArtifact({ name: 'small', filename: 's.txt' }, 'small and intact\n');
    const large = await agent.createArtifact({ name: 'large', filename: 'l.bin' }, big);
    await flip(small.artifact_id, () => 2);
    await flip(large.artifact_id, (n) => n - 10);

    const e = await agent.getContent(small.artifact_id, 1).catch((err: unknown) => err);
    assert.ok(e instanceof HttpIntegrityError, String(e));
    assert.ok(e instanceof IntegrityError);
    assert.equal(e.code, 'INTEGRITY');
    assert.equal(e.status, 502);

    await assert.rejects((async () => (await agent.getContent(large.artifact_id, 1)).bytes())(), IntegrityError);
    const streamed = await drain(toNodeReadable(await agent.getContent(large.artifact_id, 1)));
    assert.ok(streamed.error instanceof IntegrityError, String(streamed.error));
    assert.ok(streamed.bytes < big.length, `delivered ${streamed.bytes} of ${big.length} bytes`);
    const file = path.join(tempDir('alp-client-int'), 'out.bin');
    await assert.rejects(saveToFile(await agent.getContent(large.artifact_id, 1), file), IntegrityError);
    assert.equal(fs.existsSync(file), false, 'no file for unverified bytes');
    assert.deepEqual(fs.readdirSync(path.dirname(file)), [], 'and no temporary file left');
  });

  it('bytes corrupted on the way (a tampering proxy, headers intact): refused by the client’s own re-hash', async () => {
    const direct = createNodeClient({ url: h.url, token: h.tokens.agent });
    const v = await direct.createArtifact({ name: 'on-the-wire', filename: 'w.bin' }, big);
    const text = await direct.createArtifact({ name: 'tiny', filename: 't.txt' }, 'tiny\n');
    const viaProxy = createNodeClient({ url: proxy.url, token: h.tokens.agent });
    const content = /\/content$/;
    proxy.rules.push({ action: 'tamper', method: 'GET', path: content, at: 1, times: 1 });
    const tiny = await viaProxy.getContent(text.artifact_id, 1);
    assert.equal(tiny.digest, sha256('tiny\n'), 'the headers say the right digest');
    await assert.rejects(tiny.text(), (err: unknown) => err instanceof IntegrityError && !(err instanceof HttpIntegrityError));

    proxy.rules.push({ action: 'tamper', method: 'GET', path: content, at: 1000, times: 1 });
    const streamed = await drain(toNodeReadable(await viaProxy.getContent(v.artifact_id, 1)));
    assert.ok(streamed.error instanceof IntegrityError, String(streamed.error));
    assert.ok(streamed.bytes < big.length, `the stream errored before its end (${streamed.bytes} of ${big.length})`);

    // The browser-safe client (plain-TypeScript sha256) refuses the same.
    proxy.rules.push({ action: 'tamper', method: 'GET', path: content, at: big.length - 1, times: 1 });
    const { AlpClient } = await import('../../src/client/index.ts');
    const browserish = new AlpClient({ url: proxy.url, token: h.tokens.agent });
    await assert.rejects((await browserish.getContent(v.artifact_id, 1)).bytes(), IntegrityError);
    // Untampered, both read the same verified bytes.
    assert.ok(Buffer.from(await (await browserish.getContent(v.artifact_id, 1)).bytes()).equals(big));
    // A server announcing another digest than the one expected is refused before any byte is read.
    await assert.rejects(viaProxy.getContent(v.artifact_id, 1, { expectedDigest: sha256('something else') }), IntegrityError);
  });
});
