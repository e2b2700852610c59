/**
 * The artifacts view's search query (lib/search.ts): the URL holds it (shareable), the form's label
 * text parses to key=value pairs, and the API request carries exactly the query. The server side of
 * the search is tested in test/lifecycle/aliases.test.ts; the view in a browser in test/e2e/tools.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { VERSION_STATES } from '../../src/lifecycle/states.ts';
import { parseLabelsText, searchApiPath, searchHref, searchOf, searchTitle } from '../../src/web/app/lib/search.ts';

const key = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._/-]{0,10}$/);
const query = fc.record({
  prefix: fc.string({ maxLength: 12 }),
  labels: fc.uniqueArray(fc.tuple(key, fc.string({ maxLength: 12 })), { maxLength: 4, selector: ([k]) => k }),
  state: fc.option(fc.constantFrom(...VERSION_STATES), { nil: undefined }),
});

describe('web UI: the search query in the URL and the API request', () => {
  it('a URL holds the search it was made from (any prefix, labels with any value, any state)', () => {
    fc.assert(
      fc.property(query, (q) => {
        const href = searchHref(q);
        const back = searchOf(new URL(href, 'http://x').searchParams);
        if (!q.prefix && q.labels.length === 0) return assert.equal(back, undefined, 'no search: the view lists by state');
        assert.deepEqual(back, { ...q, invalid: [] });
      }),
    );
  });

  it('the API request carries the query as /v1/search takes it, with the page size and cursor', () => {
    fc.assert(
      fc.property(query, fc.option(fc.base64String({ minLength: 1, maxLength: 20 }), { nil: undefined }), (q, cursor) => {
        const url = new URL(searchApiPath(q, 20, cursor), 'http://x');
        assert.equal(url.pathname, '/v1/search');
        const p = url.searchParams;
        assert.equal(p.get('name_prefix'), q.prefix || null);
        assert.deepEqual(
          p.getAll('label'),
          q.labels.map(([k, v]) => `${k}=${v}`),
        );
        assert.equal(p.get('state'), q.state ?? null);
        assert.equal(p.get('limit'), '20');
        assert.equal(p.get('cursor'), cursor ?? null);
      }),
    );
  });

  it('the form takes labels as key=value separated by commas; a value keeps a comma not followed by key=', () => {
    assert.deepEqual(parseLabelsText(' team = data, risk=high '), {
      labels: [
        ['team', 'data'],
        ['risk', 'high'],
      ],
      invalid: [],
    });
    assert.deepEqual(parseLabelsText('note=a, b and c'), { labels: [['note', 'a, b and c']], invalid: [] });
    assert.deepEqual(parseLabelsText('a=b=c'), { labels: [['a', 'b=c']], invalid: [] });
    assert.deepEqual(parseLabelsText('   '), { labels: [], invalid: [] });
    assert.deepEqual(parseLabelsText('team'), { labels: [], invalid: ['team'] }, 'a bare key is not a label search');
    assert.deepEqual(parseLabelsText('=x'), { labels: [], invalid: ['=x'] });
  });

  it('a URL label that is not key=value is reported, not dropped; an unknown state is no state', () => {
    const s = searchOf(new URLSearchParams('label=team&label=risk=high&state=nope'));
    assert.deepEqual(s, { prefix: '', labels: [['risk', 'high']], state: undefined, invalid: ['team'] });
    assert.equal(searchOf(new URLSearchParams('state=PROPOSED')), undefined);
    assert.equal(searchOf(new URLSearchParams('prefix=a&state=approved'))?.state, 'APPROVED');
  });

  it('titles say what is listed', () => {
    assert.equal(searchTitle({ prefix: 'note-0', labels: [], state: undefined }), 'Artifacts named “note-0…”');
    assert.equal(searchTitle({ prefix: '', labels: [['risk', 'medium']], state: 'PROPOSED' }), 'Proposed versions labelled risk=medium');
  });
});
