import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { canonicalJson } from '../../src/core/canonical-json.ts';
import { ManualClock, parseDuration } from '../../src/core/clock.ts';
import { parseContentUrl, parseMetadataUrl, resolveStorageConfig } from '../../src/core/config.ts';
import { fromStructuredDigest, isDigest, parseDigest, sha256, toStructuredDigest } from '../../src/core/digest.ts';
import { AlpError, ConditionFailed, IntegrityError, InvalidInput, NotFound, StaleEpoch, Unauthenticated } from '../../src/core/errors.ts';
import { isUlid, newId } from '../../src/core/ids.ts';
import * as K from '../../src/core/keys.ts';
import {
  archiveKey,
  contentKey,
  executionKey,
  filenameProblem,
  metadataKey,
  provenanceKey,
  rollbackKey,
} from '../../src/core/object-keys.ts';

describe('digests', () => {
  it('formats, parses and validates sha256:<64 lowercase hex>', () => {
    const d = sha256('abc');
    assert.equal(d, 'sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    assert.ok(isDigest(d));
    for (const bad of [
      '',
      'sha256:',
      `sha256:${'A'.repeat(64)}`,
      `sha1:${'a'.repeat(40)}`,
      `sha256:${'a'.repeat(63)}`,
      `SHA256:${'a'.repeat(64)}`,
      ` ${d}`,
    ]) {
      assert.equal(isDigest(bad), false, bad);
      assert.throws(() => parseDigest(bad), InvalidInput);
    }
  });
  it('converts to and from the RFC 9530 structured form', () => {
    const d = sha256('hello');
    const header = toStructuredDigest(d);
    assert.equal(header, 'sha-256=:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:');
    assert.equal(fromStructuredDigest(header), d);
    assert.equal(fromStructuredDigest(`sha-512=:abc=:, ${header}`), d);
    assert.equal(fromStructuredDigest('sha-512=:abc=:'), undefined);
    assert.throws(() => fromStructuredDigest('sha-256=:AAAA:'), InvalidInput);
  });
});

describe('canonical JSON', () => {
  it('is independent of key order and drops undefined members', () => {
    assert.equal(canonicalJson({ b: 1, a: [2, { d: 1, c: null }], u: undefined }), '{"a":[2,{"c":null,"d":1}],"b":1}');
  });
  it('equal values give equal text (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const shuffled = JSON.parse(
          JSON.stringify(v, (_k, x) =>
            x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).reverse()) : x,
          ),
        );
        assert.equal(canonicalJson(shuffled), canonicalJson(v));
      }),
    );
  });
});

describe('ids and clock', () => {
  it('ULIDs follow the injected clock and sort by time', () => {
    const clock = new ManualClock('2026-01-01T00:00:00Z');
    const a = newId(clock);
    clock.advance(1000);
    const b = newId(clock);
    assert.ok(isUlid(a) && isUlid(b));
    assert.ok(a < b);
    const same = [newId(clock), newId(clock), newId(clock)];
    assert.deepEqual([...same].sort(), same, 'monotonic within one millisecond');
  });
  it('the random part of ULIDs (drawn from a pooled CSPRNG) is unique and uses every character evenly', () => {
    // Later than any time used before in this process: an earlier one would reuse the last time, incremented (monotonic).
    const clock = new ManualClock('2099-01-01T00:00:00Z');
    const ids = Array.from({ length: 32_000 }, () => {
      clock.advance(1);
      return newId(clock);
    });
    assert.equal(new Set(ids.map((id) => id.slice(10))).size, ids.length);
    for (const position of [10, 17, 25]) {
      const counts = new Map<string, number>();
      for (const id of ids) counts.set(id[position] as string, (counts.get(id[position] as string) ?? 0) + 1);
      // 1,000 expected per character; 32 characters × 4.5 standard deviations (±~140) keeps this from flaking.
      assert.equal(counts.size, 32, `position ${position}`);
      for (const [ch, n] of counts) assert.ok(n > 850 && n < 1150, `position ${position}: ${ch} ${n} times`);
    }
  });
  it('parses durations', () => {
    assert.equal(parseDuration('7d'), 7 * 86_400_000);
    assert.equal(parseDuration('90m'), 90 * 60_000);
    assert.equal(parseDuration('2w'), 14 * 86_400_000);
    assert.equal(parseDuration('7 days'), undefined);
    assert.equal(parseDuration('-1d'), undefined);
  });
});

describe('errors', () => {
  it('carry stable codes, the CLI exit codes of DESIGN §7 and HTTP statuses', () => {
    const cases: Array<[AlpError, string, number, number]> = [
      [new InvalidInput('x'), 'INVALID', 2, 400],
      [new NotFound('x'), 'NOT_FOUND', 3, 404],
      [new ConditionFailed('x'), 'CONDITION_FAILED', 4, 409],
      [new StaleEpoch(1, 2), 'STALE_EPOCH', 4, 409],
      [new IntegrityError('x'), 'INTEGRITY', 5, 502],
      [new Unauthenticated(), 'UNAUTHENTICATED', 6, 401],
    ];
    for (const [e, code, exit, http] of cases) {
      assert.equal(e.code, code);
      assert.equal(e.exitCode, exit);
      assert.equal(e.httpStatus, http);
    }
  });
});

describe('item keys (DESIGN §3)', () => {
  it('build the single-table keys exactly', () => {
    assert.equal(K.artifactPk('01ABC'), 'ART#01ABC');
    assert.equal(K.versionSk(1), 'V#0000000001');
    assert.equal(K.stateGsiPk('DRAFT'), 'STATE#DRAFT');
    assert.equal(K.createdGsiSk('2026-01-01T00:00:00.000Z', '01ABC'), '#2026-01-01T00:00:00.000Z#01ABC');
    assert.equal(K.transitionSk('2026-01-01T00:00:00.000Z', 7), 'TRANS#2026-01-01T00:00:00.000Z#0000000007');
    assert.equal(K.transitionGsiPk('2026-01-01'), 'TRANS#2026-01-01');
    assert.equal(K.approvalSk('2026-01-01T00:00:00.000Z', 3), 'APPROVAL#2026-01-01T00:00:00.000Z#0000000003');
    assert.equal(K.approverGsiPk('alice'), 'APPROVER#alice');
    assert.equal(K.executionSk('01RUN'), 'EXEC#01RUN');
    assert.equal(K.runGsiPk('2026-01-01'), 'RUN#2026-01-01');
    assert.equal(K.provenanceSk(12), 'PROV#000012');
    assert.equal(K.compensationSk('01C'), 'COMP#01C');
    assert.equal(K.compStateGsiPk('DRAFT'), 'COMP_STATE#DRAFT');
    assert.throws(() => K.versionSk(-1));
    assert.throws(() => K.provenanceSk(1_000_000));
  });
});

describe('object keys and filenames (DESIGN §4)', () => {
  it('build the RFC §9.2 layout', () => {
    assert.equal(contentKey('01A', 3, 'run.sh'), 'artifacts/01A/v3/run.sh');
    assert.equal(rollbackKey('01A', 3, 'run.sh'), 'artifacts/01A/v3/rollback-run.sh');
    assert.equal(metadataKey('01A', 3), 'artifacts/01A/v3/metadata.json');
    assert.equal(executionKey('01R', 'stdout.log'), 'executions/01R/stdout.log');
    assert.equal(provenanceKey('01A'), 'provenance/01A.json');
    assert.equal(archiveKey(new Date('2026-02-03T00:00:00Z'), '01A', 'artifacts/01A/v3/run.sh'), 'archive/2026/02/01A/v3/run.sh');
    assert.equal(
      archiveKey(new Date('2026-12-03T00:00:00Z'), '01A', 'executions/01R/stdout.log'),
      'archive/2026/12/01A/executions/01R/stdout.log',
    );
  });

  const rejected: Array<[string, string]> = [
    ['', 'empty'],
    ['a/b', 'slash'],
    ['a\\b', 'backslash'],
    ['a\u0000b', 'NUL'],
    ['tab\there', 'control character'],
    ['new\nline', 'newline'],
    ['\u007f', 'DEL'],
    ['\u0085', 'C1 control'],
    ['evil\u202Etxt.sh', 'RTL override'],
    ['iso\u2066late', 'bidi isolate'],
    ['.', 'dot'],
    ['..', 'dot dot'],
    ['metadata.json', 'reserved metadata.json'],
    ['rollback-x.sh', 'rollback- prefix'],
    ['.alp-tmp-1', 'reserved temp prefix'],
    ['x'.repeat(256), '256 bytes'],
    ['é'.repeat(128), '256 UTF-8 bytes'],
    ['e\u0301', 'not NFC'],
    ['\ud800x', 'lone surrogate'],
  ];
  for (const [name, why] of rejected) {
    it(`rejects a filename: ${why}`, () => {
      assert.ok(filenameProblem(name), `${why} should be refused`);
      assert.throws(() => contentKey('01A', 1, name), InvalidInput);
    });
  }
  it('accepts ordinary and international filenames up to 255 bytes', () => {
    for (const ok of ['run.sh', 'migration 001.sql', '.env', 'résumé.pdf', '数据.csv', 'x'.repeat(255), 'a..b', '-dash']) {
      assert.equal(filenameProblem(ok), undefined, ok);
    }
  });
});

describe('storage URLs', () => {
  it('parses sqlite:, file:, dynamodb:// and s3:// URLs', () => {
    assert.deepEqual(parseMetadataUrl('sqlite:./d/alp.db', '/w'), { engine: 'sqlite', path: '/w/d/alp.db' });
    assert.deepEqual(parseMetadataUrl('dynamodb://alp-table?region=eu-west-1&endpoint=http://127.0.0.1:8000'), {
      engine: 'dynamodb',
      table: 'alp-table',
      region: 'eu-west-1',
      endpoint: 'http://127.0.0.1:8000',
    });
    assert.deepEqual(parseContentUrl('file:/srv/alp', '/w'), { engine: 'fs', root: '/srv/alp' });
    assert.deepEqual(parseContentUrl('s3://my-bucket/some/prefix?region=us-west-2'), {
      engine: 's3',
      bucket: 'my-bucket',
      prefix: 'some/prefix/',
      region: 'us-west-2',
    });
    for (const bad of ['mysql://x', 'sqlite:', 'dynamodb://?region=x', 'dynamodb://t?endpoint=ftp://x'])
      assert.throws(() => parseMetadataUrl(bad), AlpError);
    for (const bad of ['ftp://x', 'file:', 's3://Bad_Bucket']) assert.throws(() => parseContentUrl(bad), AlpError);
  });
  it('resolves flags over environment over --data, defaulting to ./alp-data', () => {
    assert.deepEqual(resolveStorageConfig({}, {}, '/w'), {
      metadata: { engine: 'sqlite', path: '/w/alp-data/alp.db' },
      content: { engine: 'fs', root: '/w/alp-data/content' },
    });
    assert.equal((resolveStorageConfig({ data: 'x' }, {}, '/w').metadata as { path: string }).path, '/w/x/alp.db');
    assert.equal((resolveStorageConfig({}, { ALP_DATA: '/e' }, '/w').content as { root: string }).root, '/e/content');
    assert.equal(resolveStorageConfig({}, { ALP_METADATA: 'dynamodb://tbl' }, '/w').metadata.engine, 'dynamodb');
    assert.equal(resolveStorageConfig({ metadata: 'sqlite:/m.db' }, { ALP_METADATA: 'dynamodb://tbl' }, '/w').metadata.engine, 'sqlite');
  });
});
