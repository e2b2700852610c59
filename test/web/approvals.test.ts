/**
 * The web UI's reading of an approval's standing: what the API recorded when it was given (counted,
 * or not and why) and what happened since (expired, a new proposal round); digests in a reason are cut
 * out so they can be shown short.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { approvalStanding, latestRounds, splitDigests, standingText } from '../../src/web/app/lib/approvals.ts';

const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const FUTURE = '2026-03-08T12:00:00.000Z';
const PAST = '2026-02-01T00:00:00.000Z';
const D1 = `sha256:${'a'.repeat(64)}`;
const D2 = `sha256:${'b'.repeat(64)}`;

describe('web UI: approval standing', () => {
  it('an approval counted when given and unexpired, in the latest round, is counted', () => {
    const s = approvalStanding({ version: 2, decision: 'APPROVE', counted: true, expires_at: FUTURE, round: 1 }, NOW, 1);
    assert.deepEqual(s, { kind: 'counted', label: 'counted' });
    assert.equal(standingText(s), 'counted');
  });

  it('an approval the API did not count is not counted, with the API’s reason', () => {
    const reason = `binds ${D1}, not the version's content ${D2}`;
    const s = approvalStanding({ version: 2, decision: 'APPROVE', counted: false, not_counted_reason: reason, expires_at: FUTURE }, NOW);
    assert.deepEqual(s, { kind: 'not-counted', label: 'not counted', reason });
    assert.equal(standingText(s), `not counted: ${reason}`);
    const bare = approvalStanding({ version: 2, decision: 'APPROVE', counted: false }, NOW);
    assert.equal(standingText(bare), 'not counted: no reason recorded');
  });

  it('an approval counted when given no longer counts once it expired, or once the version was proposed again', () => {
    const expired = approvalStanding({ version: 1, decision: 'APPROVE', counted: true, expires_at: PAST, round: 1 }, NOW, 1);
    assert.equal(expired.kind, 'lapsed');
    assert.match(standingText(expired), /^no longer counted: counted when given; it has expired since$/);
    const older = approvalStanding({ version: 1, decision: 'APPROVE', counted: true, expires_at: FUTURE, round: 1 }, NOW, 2);
    assert.equal(standingText(older), 'no longer counted: counted in proposal round 1; the version was proposed again (round 2)');
  });

  it('a rejection is a rejection, whatever else it says', () => {
    assert.deepEqual(approvalStanding({ version: 1, decision: 'REJECT', counted: true, expires_at: PAST }, NOW), {
      kind: 'rejection',
      label: 'rejection',
    });
  });

  it('the latest round of each version is the highest round a decision names', () => {
    const rounds = latestRounds([
      { version: 1, decision: 'APPROVE', round: 1 },
      { version: 1, decision: 'REJECT', round: 3 },
      { version: 2, decision: 'APPROVE', round: 1 },
      { version: 3, decision: 'APPROVE' },
    ]);
    assert.deepEqual(
      [...rounds],
      [
        [1, 3],
        [2, 1],
      ],
    );
  });

  it('splitDigests cuts out every sha256 digest and keeps the text around them, losing nothing', () => {
    assert.deepEqual(splitDigests(`binds ${D1}, not ${D2}`), [{ text: 'binds ' }, { digest: D1 }, { text: ', not ' }, { digest: D2 }]);
    assert.deepEqual(splitDigests('expired when given'), [{ text: 'expired when given' }]);
    const piece = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.stringMatching(/^[0-9a-f]{64}$/).map((h) => `sha256:${h}`),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const text = pieces.join(' ');
        const parts = splitDigests(text);
        assert.equal(parts.map((p) => ('digest' in p ? p.digest : p.text)).join(''), text);
        for (const p of parts) if ('digest' in p) assert.match(p.digest, /^sha256:[0-9a-f]{64}$/);
        for (const p of parts) if ('text' in p) assert.equal(p.text.length > 0, true);
      }),
    );
  });
});
