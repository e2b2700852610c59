/**
 * The log viewer's lines: text appended in chunks cut anywhere gives the same numbered lines as the
 * whole text split once; the search finds exactly the lines holding the text, and highlighting a
 * line loses none of it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { allLines, appendText, emptyLines, highlight, linesOf, matchingLines } from '../../src/web/app/lib/lines.ts';

/** The lines of a text as an editor numbers them (no extra empty line after a final newline). */
function expected(text: string): string[] {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

describe('web UI: viewer lines', () => {
  it('numbers the lines of a text appended in chunks cut anywhere as those of the whole text', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', 'b', '\n', 'é'), maxLength: 200 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (text, cuts) => {
          const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
          let buf = emptyLines();
          let at = 0;
          for (const p of [...points, text.length]) {
            buf = appendText(buf, text.slice(at, p));
            at = p;
          }
          assert.deepEqual(allLines(buf), expected(text));
          assert.equal(buf.count, text.split('\n').length - 1, 'complete lines are those ended by a newline');
          for (const block of buf.blocks) assert.ok(block.length > 0, 'no empty block');
        },
      ),
    );
  });

  it('keeps blocks already added untouched (a view can skip re-rendering them)', () => {
    const a = appendText(emptyLines(), 'one\ntwo\nthr');
    const b = appendText(a, 'ee\nfour\n');
    assert.equal(b.blocks[0], a.blocks[0]);
    assert.deepEqual(b.blocks, [
      ['one', 'two'],
      ['three', 'four'],
    ]);
    assert.equal(b.pending, '');
    assert.deepEqual(allLines(linesOf('x')), ['x']);
  });

  it('finds the lines holding a text, case-insensitively, and nothing for an empty query', () => {
    const lines = ['INFO start', 'warn: disk', 'info done', ''];
    assert.deepEqual(matchingLines(lines, 'info'), [0, 2]);
    assert.deepEqual(matchingLines(lines, 'WARN'), [1]);
    assert.deepEqual(matchingLines(lines, ''), []);
    assert.deepEqual(matchingLines(lines, 'absent'), []);
  });

  it('highlights every occurrence of the query and loses no character of the line', () => {
    assert.deepEqual(highlight('copied chunk 15 of 150', 'CHUNK'), [
      { text: 'copied ', hit: false },
      { text: 'chunk', hit: true },
      { text: ' 15 of 150', hit: false },
    ]);
    assert.deepEqual(highlight('aaa', 'a'), [
      { text: 'a', hit: true },
      { text: 'a', hit: true },
      { text: 'a', hit: true },
    ]);
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', 'B', 'c', 'İ', ' '), maxLength: 40 }),
        fc.string({ unit: fc.constantFrom('a', 'b', 'C'), maxLength: 3 }),
        (line, q) => {
          const parts = highlight(line, q);
          assert.equal(parts.map((p) => p.text).join(''), line);
          for (const p of parts) if (p.hit) assert.equal(p.text.toLowerCase(), q.toLowerCase());
          // Where lower-casing keeps the length (not with 'İ'), a line has a hit exactly when it holds the query.
          if (q !== '' && line.toLowerCase().length === line.length)
            assert.equal(
              parts.some((p) => p.hit),
              line.toLowerCase().includes(q.toLowerCase()),
            );
        },
      ),
    );
  });
});
