/**
 * The client's plain-TypeScript sha256 (browser-side verification of streamed downloads) and its
 * digest headers agree with node:crypto and the server's RFC 9530 reading, for any bytes split into
 * any chunks (fast-check).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { fromReprDigest, JsSha256, toReprDigest } from '../../src/client/index.ts';
import { fromStructuredDigest, sha256, toStructuredDigest } from '../../src/core/digest.ts';

describe('the client sha256', () => {
  it('matches node:crypto for any bytes in any chunking', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 700 }), fc.array(fc.nat(200), { maxLength: 12 }), (bytes, cuts) => {
        const h = new JsSha256();
        let at = 0;
        for (const c of cuts) {
          const end = Math.min(bytes.length, at + c);
          h.update(bytes.subarray(at, end));
          at = end;
        }
        h.update(bytes.subarray(at));
        assert.equal(h.hex(), createHash('sha256').update(bytes).digest('hex'));
      }),
      { numRuns: 300 },
    );
  });

  it('the known vectors, and a large input', () => {
    const hex = (s: string | Uint8Array) => {
      const h = new JsSha256();
      h.update(typeof s === 'string' ? new TextEncoder().encode(s) : s);
      return h.hex();
    };
    assert.equal(hex(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    assert.equal(hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const big = new Uint8Array(3 * 1024 * 1024 + 5).map((_, i) => i % 251);
    assert.equal(hex(big), createHash('sha256').update(big).digest('hex'));
  });

  it('Repr-Digest both ways, as the server writes and reads it', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const d = sha256(bytes);
        assert.equal(toReprDigest(d), toStructuredDigest(d));
        assert.equal(fromReprDigest(toStructuredDigest(d)), d);
        assert.equal(fromStructuredDigest(toReprDigest(d)), d);
      }),
    );
    assert.equal(fromReprDigest('sha-512=:AAAA:'), undefined);
    assert.equal(fromReprDigest('sha-256=:AAAA:'), undefined);
    assert.equal(fromReprDigest(null), undefined);
  });
});
