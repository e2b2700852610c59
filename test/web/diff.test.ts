/**
 * The web UI's line diff: the edit script turns one text into the other, is minimal (as long as the
 * longest common subsequence allows), and the context view collapses only unchanged runs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type DiffOp, diffLines, splitLines, withContext } from '../../src/web/app/lib/diff.ts';

function lcs(a: string[], b: string[]): number {
  const dp = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      (dp[i] as number[])[j] =
        a[i - 1] === b[j - 1]
          ? ((dp[i - 1] as number[])[j - 1] as number) + 1
          : Math.max((dp[i - 1] as number[])[j] as number, (dp[i] as number[])[j - 1] as number);
  return (dp[a.length] as number[])[b.length] as number;
}

function apply(ops: DiffOp[]): { a: string[]; b: string[] } {
  const a: string[] = [];
  const b: string[] = [];
  for (const op of ops) {
    if (op.type !== 'add') a.push(op.text);
    if (op.type !== 'del') b.push(op.text);
  }
  return { a, b };
}

const lines = fc.array(fc.constantFrom('a', 'b', 'c', 'd', '', 'x y'), { maxLength: 40 });

describe('web UI: line diff', () => {
  it('reproduces both texts, numbers lines in order, and is minimal', () => {
    fc.assert(
      fc.property(lines, lines, (a, b) => {
        const r = diffLines(a, b);
        assert.deepEqual(apply(r.ops), { a, b });
        assert.equal(r.coarse, false);
        assert.equal(r.removed + r.added, a.length + b.length - 2 * lcs(a, b));
        let na = 0;
        let nb = 0;
        for (const op of r.ops) {
          if (op.type !== 'add') assert.equal(op.a, ++na);
          if (op.type !== 'del') assert.equal(op.b, ++nb);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('falls back to a replacement past the edit budget, still reproducing both texts', () => {
    const a = Array.from({ length: 300 }, (_, i) => `a${i}`);
    const b = Array.from({ length: 300 }, (_, i) => `b${i}`);
    const r = diffLines(['same', ...a, 'end'], ['same', ...b, 'end'], 50);
    assert.equal(r.coarse, true);
    assert.deepEqual(apply(r.ops), { a: ['same', ...a, 'end'], b: ['same', ...b, 'end'] });
    assert.equal(r.removed, 300);
    assert.equal(r.added, 300);
  });

  it('splits lines without a phantom last line', () => {
    assert.deepEqual(splitLines(''), []);
    assert.deepEqual(splitLines('x\n'), ['x']);
    assert.deepEqual(splitLines('x\r\ny'), ['x', 'y']);
    assert.deepEqual(splitLines('x\n\n'), ['x', '']);
  });

  it('collapses unchanged runs longer than twice the context, and keeps every change', () => {
    fc.assert(
      fc.property(lines, lines, fc.integer({ min: 0, max: 4 }), (a, b, context) => {
        const r = diffLines(a, b);
        const view = withContext(r.ops, context);
        const changes = r.ops.filter((o) => o.type !== 'eq');
        assert.deepEqual(
          view.filter((l) => l.type === 'add' || l.type === 'del'),
          changes,
        );
        const hidden = view.reduce((n, l) => n + (l.type === 'skip' ? l.count : 0), 0);
        const shown = view.filter((l) => l.type === 'eq').length;
        assert.equal(hidden + shown, r.ops.length - changes.length);
        for (const l of view) if (l.type === 'skip') assert.ok(l.count >= 1);
      }),
      { numRuns: 300 },
    );
  });
});
