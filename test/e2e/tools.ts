/**
 * Issue 19 items 11–13 in the browser: the operations page tells a refused upload from damaged
 * bytes, counts versions from the store and explains the telemetry outbox; downloads are re-hashed
 * and saved, digests copied, label chips, labels, name prefixes and states are searched by the server
 * (paged with "Load more", the query in a URL another tab opens), columns sort; a failed run
 * opens its stderr first, at the end; the log viewer numbers its lines and searches what it loaded;
 * the dark scheme, and the token remembered on this device only when asked.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it } from 'node:test';
import type { Page } from 'playwright-core';
import { type Digest, toStructuredDigest } from '../../src/core/digest.ts';
import { type E2eEnv, sha256, storedFile, text } from './env.ts';
import { FAILED_LAST_LINE } from './seed.ts';

type Storage = { length: number; getItem(k: string): string | null };
const storages = (page: Page) =>
  page.evaluate(() => {
    const g = globalThis as unknown as { localStorage: Storage; sessionStorage: Storage };
    return { local: g.localStorage.length, session: g.sessionStorage.length, token: g.localStorage.getItem('alp.token') };
  });

async function saved(page: Page, click: () => Promise<void>): Promise<Buffer> {
  const [download] = await Promise.all([page.waitForEvent('download'), click()]);
  const file = await download.path();
  return fs.readFileSync(file);
}

export function toolTests(env: E2eEnv): void {
  it('operations: a wrong client digest is told apart from stored bytes that failed verification; states come from the store', async () => {
    const alp = env.alp();
    const auth = { authorization: `Bearer ${alp.agent.token}` };
    // A refused upload: the body does not match the digest the client sent.
    const refused = await fetch(`${alp.url}/v1/artifacts?name=bad-digest&filename=x.txt`, {
      method: 'POST',
      headers: {
        ...auth,
        'content-type': 'application/octet-stream',
        'repr-digest': toStructuredDigest(sha256('something else') as Digest),
      },
      body: 'the real body\n',
    });
    assert.equal(refused.status, 400);
    // Damage: a stored object changed on disk, found when it is served.
    const made = await fetch(`${alp.url}/v1/artifacts?name=damaged&filename=d.txt`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/octet-stream' },
      body: 'these bytes will be damaged\n',
    });
    const damaged = (await made.json()) as { artifact_id: string; content_key: string };
    const file = storedFile(env.dataDir(), damaged.content_key);
    const bytes = fs.readFileSync(file);
    bytes[0] = (bytes[0] as number) ^ 1;
    fs.chmodSync(file, 0o644);
    fs.writeFileSync(file, bytes);
    const served = await fetch(`${alp.url}/v1/artifacts/${damaged.artifact_id}/versions/1/content`, { headers: auth });
    assert.equal(served.status, 502);
    await served.arrayBuffer();

    const { context, page } = await env.newPage(1280);
    try {
      await env.signIn(page, alp.human.token, '/operations');
      await page.getByTestId('integrity-stored').waitFor();
      assert.equal(await text(page.getByTestId('integrity-stored')), '1');
      assert.equal(await text(page.getByTestId('integrity-client')), '1');
      const metrics = await (await fetch(`${alp.url}/metrics`)).text();
      assert.match(metrics, /alp_integrity_failures_total\{operation="upload",cause="client_digest"\} 1/);
      assert.match(metrics, /alp_integrity_failures_total\{operation="download",cause="stored_bytes"\} 1/);
      // Versions by state: the store's counters, the same figures /v1/status/states answers.
      const states = (await (await fetch(`${alp.url}/v1/status/states`, { headers: auth })).json()) as { states: Record<string, number> };
      const shown = await page
        .getByTestId('store-states')
        .locator('div:not(.total)')
        .evaluateAll((els) => els.map((e) => [e.querySelector('dt')?.textContent ?? '', Number(e.querySelector('dd')?.textContent)]));
      for (const [state, n] of shown) assert.equal(n, states.states[state as string] ?? 0, `${state}`);
      assert.match(await text(page.getByTestId('states-source')), /Kept by the store/);
      const telemetry = await text(page.getByTestId('telemetry-explained'));
      assert.match(telemetry, /alp telemetry drain --to stdout/);
      await page.getByText('records not kept because the outbox was at its limit').waitFor();
    } finally {
      await context.close();
    }
  });

  it('downloads verified bytes, copies digests; searches the server by label chip, labels, name prefix and state, paged and shareable; sorts columns', async () => {
    const { migration } = env.data();
    const { context, page } = await env.newPage(1280);
    const requested: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    try {
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: env.alp().url });
      await env.signIn(page, env.alp().human.token, `/artifacts/${migration.id}/versions/2`);
      const body = await saved(page, () => page.getByRole('button', { name: /^Download migrate\.sql/ }).click());
      assert.equal(sha256(body), migration.v2, 'the saved file is the version’s content');
      await page.getByText('migrate.sql saved').waitFor();
      await page.getByRole('button', { name: `Copy digest ${migration.v2}` }).click();
      await page
        .getByRole('button', { name: `Copy digest ${migration.v2}` })
        .getByText('Copied')
        .waitFor();
      const copied = await page.evaluate(() =>
        (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText(),
      );
      assert.equal(copied, migration.v2);

      // A label chip searches the server for the artifacts with that label (GET /v1/search, every artifact).
      await page.goto(`${env.alp().url}/artifacts/${migration.id}`);
      await page.getByRole('link', { name: 'filter by label risk=medium' }).click();
      await page.getByRole('heading', { level: 1, name: 'Artifacts labelled risk=medium' }).waitFor();
      await page.getByTestId('search-status').getByText('1 artifact found — the whole installation was searched.').waitFor();
      const rows = page.getByTestId('search-table').locator('tbody tr');
      assert.deepEqual(await rows.locator('td[data-label="Artifact"] a').allTextContents(), ['migrate-users']);
      assert.ok(
        requested.some((u) => u.includes('/v1/search?') && u.includes('label=risk%3Dmedium')),
        'the server searched',
      );

      // Two labels (both must match) from the form; a bare key is refused by the form.
      await page.getByLabel('Labels', { exact: true }).fill('team');
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await page
        .getByTestId('label-error')
        .getByText(/key=value/)
        .waitFor();
      await page.getByLabel('Labels', { exact: true }).fill('team=data, risk=medium');
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Artifacts labelled team=data, risk=medium' }).waitFor();
      await page.getByTestId('search-status').getByText('1 artifact found').waitFor();

      // A name prefix (a case-sensitive start), from the search form.
      await page.getByLabel('Artifact name', { exact: true }).fill('note-0');
      await page.getByLabel('Match the name').selectOption('prefix');
      await page.getByLabel('Labels', { exact: true }).fill('');
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Artifacts named “note-0…”' }).waitFor();
      await page.getByTestId('search-status').getByText('9 artifacts found — the whole installation was searched.').waitFor();
      const names = await rows.locator('td[data-label="Artifact"] a').allTextContents();
      assert.equal(names.length, 9);
      assert.ok(
        names.every((n) => n.startsWith('note-0')),
        names.join(),
      );

      // Sorting: by name ascending, then descending; aria-sort says which.
      const header = page.getByRole('columnheader', { name: /Artifact/ });
      await header.getByRole('button').click();
      assert.equal(await header.getAttribute('aria-sort'), 'ascending');
      const asc = await rows.locator('td[data-label="Artifact"] a').allTextContents();
      assert.deepEqual(asc, [...names].sort());
      await header.getByRole('button').click();
      assert.equal(await header.getAttribute('aria-sort'), 'descending');
      assert.deepEqual(await rows.locator('td[data-label="Artifact"] a').allTextContents(), [...names].sort().reverse());
      await page.getByRole('columnheader', { name: /Kind/ }).getByRole('button').click();
      assert.equal(await header.getAttribute('aria-sort'), null);

      // A prefix and a state: versions, a page at a time ("Load more" follows the cursor), and the URL
      // opened elsewhere is the same search.
      await page.getByLabel('Artifact name', { exact: true }).fill('note-');
      await page.getByLabel('State', { exact: true }).selectOption('DRAFT');
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await page.getByRole('heading', { level: 1, name: 'Draft versions named “note-…”' }).waitFor();
      await page
        .getByTestId('search-status')
        .getByText(/^20 versions found so far/)
        .waitFor();
      await page.getByRole('button', { name: 'Load more' }).click();
      const all = `${env.data().drafts} versions found — the whole installation was searched.`;
      await page.getByTestId('search-status').getByText(all).waitFor();
      assert.equal(await rows.count(), env.data().drafts);
      assert.equal(await page.getByRole('button', { name: 'Load more' }).count(), 0);
      const shared = page.url();
      assert.match(shared, /\/artifacts\?prefix=note-&state=DRAFT$/);
      const other = await env.newPage(390);
      try {
        await env.signIn(other.page, env.alp().human.token, new URL(shared).pathname + new URL(shared).search);
        await other.page.getByRole('heading', { level: 1, name: 'Draft versions named “note-…”' }).waitFor();
        await other.page
          .getByTestId('search-status')
          .getByText(/^20 versions found so far/)
          .waitFor();
        assert.equal(await other.page.getByLabel('Artifact name', { exact: true }).inputValue(), 'note-');
        assert.equal(await other.page.getByLabel('State', { exact: true }).inputValue(), 'DRAFT');
      } finally {
        await other.context.close();
      }
    } finally {
      await context.close();
    }
  });

  it('opens a failed run at the end of its stderr; the log viewer numbers lines, searches the loaded range and downloads', async () => {
    const { deploy, bigLog } = env.data();
    const { context, page } = await env.newPage(1280);
    try {
      await env.signIn(page, env.alp().human.token, `/runs/${deploy.runFailed}`);
      const stderr = page.getByRole('region', { name: 'stderr.log content' });
      await stderr.getByText(FAILED_LAST_LINE).waitFor();
      const outputs = await page.locator('article h2').allTextContents();
      assert.deepEqual(outputs.slice(0, 2), ['stderr.log', 'stdout.log'], 'stderr first for a failed run');
      await page.waitForFunction(
        () => {
          const el = (
            globalThis as unknown as {
              document: { querySelector(s: string): { scrollTop: number; scrollHeight: number; clientHeight: number } | null };
            }
          ).document.querySelector('[aria-label="stderr.log content"]');
          return el !== null && el.scrollHeight > el.clientHeight && el.scrollTop + el.clientHeight >= el.scrollHeight - 2;
        },
        undefined,
        { timeout: 5000 },
      );
      const last = stderr.locator('.line', { hasText: FAILED_LAST_LINE });
      assert.equal(await last.getAttribute('data-n'), '121');
      const log = await saved(page, () => page.getByRole('button', { name: /^Download stderr\.log/ }).click());
      assert.ok(log.toString('utf8').endsWith(`${FAILED_LAST_LINE}\n`));

      // The 50 MiB log: numbered from 1; a search finds a line in the loaded range and scrolls to it.
      await page.goto(`${env.alp().url}/runs/${bigLog.run}/stdout.log`);
      const viewer = page.getByRole('region', { name: 'stdout.log content' });
      const first = viewer.locator('.line').first();
      await first.waitFor();
      assert.equal(await first.getAttribute('data-n'), '1');
      await page.getByLabel('Find in the loaded text').fill('copied chunk 1500 ');
      await page.getByLabel('Find in the loaded text').press('Enter');
      await page.getByTestId('find-status').getByText('Match 1 of 1 line, line 1501').waitFor();
      const hit = viewer.locator('.line.current');
      assert.equal(await hit.getAttribute('data-n'), '1501');
      assert.equal(await hit.locator('mark').textContent(), 'copied chunk 1500 ');
      const inView = await hit.evaluate((el) => {
        const box = (el as unknown as { closest(s: string): { getBoundingClientRect(): { top: number; bottom: number } } }).closest(
          '.viewer',
        );
        const r = (el as unknown as { getBoundingClientRect(): { top: number; bottom: number } }).getBoundingClientRect();
        const b = box.getBoundingClientRect();
        return r.top >= b.top && r.bottom <= b.bottom;
      });
      assert.ok(inView, 'the match is scrolled into the viewer');
      await page.getByLabel('Find in the loaded text').fill('END of log');
      await page.getByLabel('Find in the loaded text').press('Enter');
      await page.getByTestId('find-status').getByText('No loaded line contains “END of log”').waitFor();
    } finally {
      await context.close();
    }
  });

  it('follows prefers-color-scheme: dark (axe still clean), and remembers the token on this device only when asked', async () => {
    const { migration } = env.data();
    const { context, page } = await env.newPage(1280);
    const report: string[] = [];
    try {
      const background = () =>
        page.evaluate(() => {
          const g = globalThis as unknown as {
            getComputedStyle(e: unknown): { backgroundColor: string };
            document: { documentElement: unknown };
          };
          return g.getComputedStyle(g.document.documentElement).backgroundColor;
        });
      await page.goto(`${env.alp().url}/`);
      await page.getByLabel('Access token').waitFor();
      const light = await background();
      await page.emulateMedia({ colorScheme: 'dark' });
      const dark = await background();
      assert.notEqual(dark, light);
      assert.equal(dark, 'rgb(13, 17, 23)');
      await env.check(page, 'signin-dark', 1280, report);

      // Remember on this device: a link opened in another tab is signed in; signing out clears both stores.
      await page.getByLabel('Access token').fill(env.alp().human.token);
      await page.getByLabel('Remember on this device').check();
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      assert.equal((await storages(page)).token, env.alp().human.token);
      const other = await context.newPage();
      await other.goto(`${env.alp().url}/artifacts/${migration.id}/versions/2`);
      await other.getByRole('heading', { level: 1, name: /migrate-users/ }).waitFor();
      await other.getByRole('button', { name: 'Sign out' }).click();
      await other.getByLabel('Access token').waitFor();
      assert.deepEqual(await storages(other), { local: 0, session: 0, token: null });
      // The first tab follows the sign-out made in the other one.
      await page.getByLabel('Access token').waitFor();
      assert.equal((await storages(page)).local, 0);
      await other.close();

      // By default the token stays in its tab: another tab asks for it.
      await env.signIn(page, env.alp().human.token);
      assert.equal((await storages(page)).local, 0);
      const third = await context.newPage();
      await third.goto(`${env.alp().url}/artifacts/${migration.id}`);
      await third.getByLabel('Access token').waitFor();
      await third.close();
    } finally {
      await context.close();
    }
  });
}
