/**
 * Filenames, names, labels and evidence under hostile input (fast-check): unicode normalization pairs
 * (NFC/NFD), compatibility forms, bidi overrides and marks, zero-width and other invisible characters,
 * tag characters, separators, traversal, reserved names, lone surrogates, 10 KB inputs.
 *
 * The oracle is written here from the rules (DESIGN §4 and docs/reliability.md), independently of the
 * validation code: a value is accepted exactly when the rules allow it. An accepted filename lands at a
 * key strictly inside the content root, as one path segment, with exactly the bytes sent; a refused one
 * is refused with INVALID before a byte or an item is written. Symlinks planted inside the content root
 * are never followed out of it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import fc from 'fast-check';
import { sha256 } from '../../src/core/digest.ts';
import { InvalidInput } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { embeddedContext, type TestContext } from '../helpers/context.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';

// ---- the rules, written out for the oracle

const BIDI_CONTROLS = [0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069];
const INVISIBLE = [0x00ad, 0x180e, 0x200b, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f];
const INVISIBLE_MORE = [0xfeff, 0xfff9, 0xfffa, 0xfffb];

function refusedChar(cp: number): boolean {
  if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f)) return true; // C0, DEL, C1
  if (BIDI_CONTROLS.includes(cp) || INVISIBLE.includes(cp) || INVISIBLE_MORE.includes(cp)) return true;
  if (cp >= 0xe0000 && cp <= 0xe007f) return true; // tags
  if (cp >= 0xe0100 && cp <= 0xe01ef) return true; // supplementary variation selectors
  return false;
}

function wellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return false;
  }
  return true;
}

function textAllowed(s: string): boolean {
  return wellFormed(s) && ![...s].some((ch) => refusedChar(ch.codePointAt(0) as number)) && s === s.normalize('NFC');
}

function filenameAllowed(f: string): boolean {
  const bytes = Buffer.byteLength(f, 'utf8');
  return (
    bytes >= 1 &&
    bytes <= 255 &&
    textAllowed(f) &&
    !f.includes('/') &&
    !f.includes('\\') &&
    f !== '.' &&
    f !== '..' &&
    f !== 'metadata.json' &&
    !f.startsWith('rollback-') &&
    !f.startsWith('.alp-')
  );
}

function nameAllowed(n: string): boolean {
  return n.length >= 1 && n.length <= 200 && textAllowed(n) && n.trim() === n;
}

// ---- hostile strings

const specials = [
  '\u202E',
  '\u202D',
  '\u2066',
  '\u2069',
  '\u200E',
  '\u200F',
  '\u061C',
  '\u200B',
  '\u200C',
  '\u200D',
  '\u2060',
  '\uFEFF',
  '\u00AD',
  '\u180E',
  '\u{E0041}',
  '\u{E0100}',
  '\uFE0F',
  '\u0301', // combining acute: NFD when after a base letter
  '\u00E9',
  'e\u0301',
  '\u212B', // Angstrom sign: NFC maps it to Å
  '\u212A', // Kelvin sign: NFC maps it to K
  'ﬁ',
  'Ａ',
  '\uFF0F', // fullwidth solidus
  '\u2215', // division slash
  '\u2024', // one dot leader
  '\uFE52', // small full stop
  '\u0000',
  '\u0007',
  '\u001B',
  '\u0085',
  '\u2028',
  '\u3000',
  '\uD800',
  '\uDC00',
  '😀',
  '👨\u200D👩\u200D👧',
  '/',
  '\\',
  '.',
  '..',
  ' ',
  '\t',
  '%2e%2e',
  '%2f',
  'metadata.json',
  'rollback-',
  '.alp-',
  'a',
  'report.txt',
  'ש',
  'مرحبا',
  '한',
  'ﷺ',
];
const piece = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...specials) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
  { weight: 1, arbitrary: fc.stringMatching(/^[a-z0-9._-]{1,12}$/) },
);
const hostile = fc.oneof(
  { weight: 8, arbitrary: fc.array(piece, { minLength: 1, maxLength: 5 }).map((p) => p.join('')) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'x'.repeat(10 * 1024),
      'é'.repeat(128),
      'é'.repeat(127),
      `${'a'.repeat(253)}é`,
      'a'.repeat(255),
      'a'.repeat(256),
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }).map((s) => s.normalize('NFD')) },
);

// ---- the filesystem, observed

function walk(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    out.push(p);
    if (e.isDirectory() && !e.isSymbolicLink()) walk(p, out);
  }
  return out;
}

async function itemCount(ctx: TestContext): Promise<number> {
  return (ctx.items.db.prepare('SELECT COUNT(*) AS n FROM items').get() as { n: number }).n;
}

describe('hostile filenames, names, labels and evidence', () => {
  let ctx: TestContext;
  let root: string;
  let artifactId: string;
  before(async () => {
    ctx = await embeddedContext();
    root = fs.realpathSync(ctx.contentRoot);
    artifactId = (await createArtifact(ctx, agent, { name: 'base', filename: 'base.txt', body: bytesOf('base') })).version.artifact_id;
  });

  it('accepts a filename exactly when the rules allow it; accepted ones stay one segment inside the content root', async (t) => {
    let accepted = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(hostile, fc.boolean(), async (filename, asNewArtifact) => {
        const filesBefore = walk(root);
        const itemsBefore = await itemCount(ctx);
        const body = `bytes of ${JSON.stringify(filename).slice(0, 40)}`;
        const attempt = asNewArtifact
          ? createArtifact(ctx, agent, { name: 'n', filename, body: bytesOf(body) }).then((r) => r.version)
          : addVersion(ctx, agent, artifactId, { filename, body: bytesOf(body) });
        const outcome = await attempt.then(
          (v) => ({ v }),
          (e: unknown) => ({ e }),
        );
        if (!filenameAllowed(filename)) {
          refused++;
          assert.ok('e' in outcome, `accepted ${JSON.stringify(filename)}`);
          assert.ok(outcome.e instanceof InvalidInput, `refused ${JSON.stringify(filename)} with ${String(outcome.e)}`);
          assert.deepEqual(walk(root), filesBefore, 'no byte written for a refused filename');
          assert.equal(await itemCount(ctx), itemsBefore, 'no item written for a refused filename');
          return;
        }
        accepted++;
        assert.ok('v' in outcome, `refused ${JSON.stringify(filename)}: ${String((outcome as { e: unknown }).e)}`);
        const v = outcome.v;
        assert.equal(v.filename, filename);
        const key = v.content_key as string;
        assert.equal(key, `artifacts/${v.artifact_id}/v${v.version}/${filename}`);
        const file = path.resolve(root, key);
        assert.ok(file.startsWith(`${root}${path.sep}`), `${key} resolves inside the root`);
        assert.deepEqual(path.relative(root, file).split(path.sep), ['artifacts', v.artifact_id, `v${v.version}`, filename]);
        assert.ok(fs.realpathSync(file).startsWith(`${root}${path.sep}`));
        assert.equal(fs.readFileSync(file, 'utf8'), body);
      }),
      { numRuns: 400, seed: 42 },
    );
    t.diagnostic(`filenames: ${accepted} accepted, ${refused} refused`);
    assert.ok(accepted > 50 && refused > 50, `accepted ${accepted}, refused ${refused}`);
  });

  it('accepts names, label values and evidence exactly when the rules allow them, and nothing else is written', async () => {
    await propose(ctx, agent, artifactId, 1);
    await fc.assert(
      fc.asyncProperty(hostile, hostile, hostile, async (name, label, evidence) => {
        const itemsBefore = await itemCount(ctx);
        const filesBefore = walk(root);
        const created = await createArtifact(ctx, agent, {
          name,
          filename: 'f.txt',
          labels: { team: label },
          body: bytesOf('x'),
        }).then(
          () => true,
          (e: unknown) => {
            assert.ok(e instanceof InvalidInput, String(e));
            return false;
          },
        );
        const labelOk = label.length <= 256 && textAllowed(label);
        assert.equal(created, nameAllowed(name) && labelOk, `name ${JSON.stringify(name)} label ${JSON.stringify(label)}`);
        if (!created) {
          assert.equal(await itemCount(ctx), itemsBefore);
          assert.deepEqual(walk(root), filesBefore);
        }
        const stepped = await addProvenance(ctx, agent, artifactId, { action: evidence, note: label }).then(
          () => true,
          (e: unknown) => {
            assert.ok(e instanceof InvalidInput, String(e));
            return false;
          },
        );
        assert.equal(stepped, evidence.length <= 200 && textAllowed(evidence) && evidence.length >= 1 && labelOk);
      }),
      { numRuns: 200, seed: 7 },
    );
    // Evidence on a decision: refused before anything is recorded; an accepted one decides.
    for (const evidence of ['\u202Eevil', 'zero\u200Bwidth', 'e\u0301', 'x'.repeat(10 * 1024), 'tag\u{E0041}', 'rlm\u200F']) {
      const before = await itemCount(ctx);
      await assert.rejects(decide(ctx, alice, artifactId, 1, { decision: 'APPROVE', evidenceRef: evidence }), InvalidInput);
      assert.equal(await itemCount(ctx), before);
    }
    const ok = await decide(ctx, alice, artifactId, 1, { decision: 'APPROVE', evidenceRef: 'تذكرة-1 👨\u200D👩\u200D👧 café' });
    assert.equal(ok.version.state, 'APPROVED');
  });

  it('10 KB names, filenames, labels and evidence are refused cleanly and fast', async () => {
    const big = 'n'.repeat(10 * 1024);
    const started = performance.now();
    const before = await itemCount(ctx);
    await assert.rejects(createArtifact(ctx, agent, { name: big, filename: 'f', body: bytesOf('x') }), InvalidInput);
    await assert.rejects(createArtifact(ctx, agent, { name: 'n', filename: big, body: bytesOf('x') }), InvalidInput);
    await assert.rejects(createArtifact(ctx, agent, { name: 'n', filename: 'f', labels: { k: big }, body: bytesOf('x') }), InvalidInput);
    await assert.rejects(
      createArtifact(ctx, agent, { name: 'n', filename: 'f', labels: { [big]: 'v' }, body: bytesOf('x') }),
      InvalidInput,
    );
    await assert.rejects(addProvenance(ctx, agent, artifactId, { action: 'a', note: big }), InvalidInput);
    assert.equal(await itemCount(ctx), before);
    assert.ok(performance.now() - started < 2000);
  });

  it('symlinks planted inside the content root are refused, never followed out of it', async () => {
    const c = await embeddedContext();
    const outside = tempDir('alp-outside');
    fs.writeFileSync(path.join(outside, 'victim'), 'untouched');
    const croot = c.contentRoot;
    // A symlinked top-level directory: every new version would land outside.
    fs.symlinkSync(outside, path.join(croot, 'artifacts'));
    await assert.rejects(createArtifact(c, agent, { name: 'n', filename: 'victim', body: bytesOf('evil') }), InvalidInput);
    await assert.rejects(c.content.put('artifacts/x/v1/victim', [Buffer.from('evil')]), InvalidInput);
    await assert.rejects(c.content.get('artifacts/victim', sha256('x')), InvalidInput);
    fs.unlinkSync(path.join(croot, 'artifacts'));
    // A symlinked leaf: a put replaces the link itself; the file it pointed at is untouched.
    fs.mkdirSync(path.join(croot, 'executions', 'R'), { recursive: true });
    fs.symlinkSync(path.join(outside, 'victim'), path.join(croot, 'executions', 'R', 'stdout.log'));
    await assert.rejects(c.content.get('executions/R/stdout.log', sha256('x')), InvalidInput);
    await c.content.put('executions/R/stdout.log', [Buffer.from('mine')]);
    assert.equal(fs.lstatSync(path.join(croot, 'executions', 'R', 'stdout.log')).isSymbolicLink(), false);
    assert.deepEqual(fs.readdirSync(outside), ['victim']);
    assert.equal(fs.readFileSync(path.join(outside, 'victim'), 'utf8'), 'untouched');
    // A symlinked directory deeper down, and keys that try to climb out.
    fs.symlinkSync(outside, path.join(croot, 'executions', 'L'));
    await assert.rejects(c.content.put('executions/L/stdout.log', [Buffer.from('evil')]), InvalidInput);
    for (const key of ['../x', 'artifacts/../../x', '/etc/passwd', 'a//b', 'a/./b', 'a\\..\\b', 'a/\u0000/b', 'artifacts/.alp-tmp-1'])
      await assert.rejects(c.content.put(key, [Buffer.from('evil')]), InvalidInput, key);
    assert.deepEqual(fs.readdirSync(outside), ['victim']);
    assert.equal(fs.readFileSync(path.join(outside, 'victim'), 'utf8'), 'untouched');
  });
});
