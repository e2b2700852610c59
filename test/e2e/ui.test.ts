/**
 * The web UI in a real browser (Debian's Chromium via playwright-core) against `alp start` on a seeded
 * installation: a human signs in, finds the PROPOSED migration, inspects its content and provenance,
 * approves exactly its digest and sees the state change; an agent is not offered approval and the API
 * refuses it; a 50 MiB log opens without freezing the page and loads in 256 KiB ranges; every view is
 * screenshotted at 1280 and 390 px and in the dark scheme (test-results/screenshots/), has no serious
 * axe-core violation and no horizontal overflow. Issue 19's second round (review.ts, tools.ts) runs
 * against the same server.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import type { E2eEnv } from './env.ts';
import { type AlpProcess, axe, launchChromium, SCREENSHOTS, serious, startAlp } from './harness.ts';
import { reviewTests } from './review.ts';
import { type Seeded, seed } from './seed.ts';
import { toolTests } from './tools.ts';

// Browser globals, used only inside page.evaluate callbacks (these files compile without the DOM library).
declare const window: Record<string, unknown>;
declare const document: { cookie: string; activeElement: unknown; documentElement: { scrollWidth: number; clientWidth: number } };
declare const sessionStorage: { getItem(key: string): string | null; length: number };
declare const localStorage: { length: number };

const WIDTHS = [1280, 390] as const;

/** A locator's text (its DOM textContent). */
const text = async (l: Locator) => (await l.textContent()) ?? '';
const BIG_LOG = 50 * 1024 * 1024;

describe('web UI end to end (Chromium)', { timeout: 300_000 }, () => {
  let alp: AlpProcess;
  let browser: Browser;
  let data: Seeded;
  let dir: string;
  const requestedUrls: string[] = [];
  const pageErrors: string[] = [];

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'alp-e2e-'));
    fs.rmSync(SCREENSHOTS, { recursive: true, force: true });
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launchChromium();
    alp = await startAlp(path.join(dir, 'data'));
    data = await seed(alp.url, { human: alp.human.token, agent: alp.agent.token }, { bigLogBytes: BIG_LOG });
  });

  after(async () => {
    await browser?.close();
    await alp?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  async function newPage(width: number = WIDTHS[0]): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width, height: 900 }, deviceScaleFactor: 1 });
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on('request', (r) => requestedUrls.push(r.url()));
    page.on('pageerror', (e) => pageErrors.push(`${page.url()}: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text()))
        pageErrors.push(`${page.url()}: console: ${m.text()}`);
    });
    return { context, page };
  }

  async function signIn(page: Page, token: string, path = '/'): Promise<void> {
    await page.goto(`${alp.url}${path}`);
    await page.getByLabel('Access token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
  }

  const env: E2eEnv = {
    alp: () => alp,
    data: () => data,
    dataDir: () => path.join(dir, 'data'),
    newPage: (width) => newPage(width),
    signIn: (page, token, at) => signIn(page, token, at),
    check: (page, name, width, report) => check(page, name, width, report),
  };

  it('signs in as an agent: approving is not offered, and the API refuses it', async () => {
    const { context, page } = await newPage();
    try {
      await signIn(page, alp.agent.token);
      await page.getByRole('banner').getByText('agent').first().waitFor();
      // The default view is the review queue: PROPOSED versions, with counts per state.
      await page.getByRole('heading', { level: 1, name: 'Proposed versions' }).waitFor();
      const proposedTab = page.getByRole('navigation', { name: 'Versions by state' }).getByRole('link', { name: /Proposed/ });
      await proposedTab.locator('.count', { hasText: /^\d+$/ }).waitFor();
      assert.match(await text(proposedTab), /Proposed\s*1/);
      await page.getByRole('link', { name: data.migration.name, exact: true }).click();
      await page.getByTestId('decision-panel').waitFor();
      assert.match(await text(page.getByTestId('not-human')), /Only human principals can approve/);
      assert.equal(await page.getByRole('button', { name: /Approve/ }).count(), 0, 'no Approve button for an agent');
      assert.equal(await page.getByRole('button', { name: /Reject/ }).count(), 0, 'no Reject button for an agent');
      // The API refuses the agent all the same (same origin, the session's own token).
      const refused = await page.evaluate(
        async ({ id, digest }) => {
          const token = sessionStorage.getItem('alp.token');
          const res = await fetch(`/v1/artifacts/${id}/versions/2/approvals`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ decision: 'APPROVE', evidence_ref: 'agent-try', content_hash: digest }),
          });
          return { status: res.status, type: res.headers.get('content-type'), body: (await res.json()) as { code: string } };
        },
        { id: data.migration.id, digest: data.migration.v2 },
      );
      assert.equal(refused.status, 403);
      assert.equal(refused.type, 'application/problem+json');
      assert.equal(refused.body.code, 'FORBIDDEN');
      assert.equal(await text(page.getByTestId('version-state')), 'PROPOSED');
      await shoot(page, 'version-as-agent', 1280);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByLabel('Access token').waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'signing out forgets the token');
    } finally {
      await context.close();
    }
  });

  it('signs in as a human, finds the PROPOSED artifact, inspects content and provenance, approves it and sees the state change', async () => {
    const { context, page } = await newPage();
    try {
      await signIn(page, alp.human.token);
      await page.getByRole('heading', { level: 1, name: 'Proposed versions' }).waitFor();
      await page.getByRole('link', { name: data.migration.name, exact: true }).click();
      await page.getByRole('heading', { level: 1, name: /migrate-users/ }).waitFor();
      // Content: fetched verified, re-hashed in the browser.
      const viewer = page.getByRole('region', { name: /migrate\.sql \(v2\) content/ });
      await viewer.getByText('CREATE INDEX users_display_name ON users (display_name);').waitFor();
      await page.getByText('sha256 recomputed in this browser matches the digest').waitFor();
      // The exact digest being approved is shown.
      assert.equal((await text(page.getByTestId('approve-digest'))).trim(), data.migration.v2);
      // The effective approval policy (issue 20 item 4): quorum needed, counted so far, whether this human's approval would count, evidence, lifetime.
      const policy = page.getByTestId('review-policy');
      await policy.waitFor();
      assert.equal(await text(policy.getByTestId('policy-quorum')), 'Quorum: 0 of 1 human approval counted so far.');
      assert.equal(await text(policy.getByTestId('policy-yours')), 'Your approval would count.');
      assert.equal(await text(policy.getByTestId('policy-evidence')), 'Evidence: any reference.');
      assert.equal(await text(policy.getByTestId('policy-lifetime')), 'An approval counts for at most 365 days after it is given.');

      // Provenance: a graph, with the input from another artifact linked to it.
      await page.getByRole('navigation', { name: 'Artifact views' }).getByRole('link', { name: 'Provenance' }).click();
      const graph = page.getByTestId('provenance-graph');
      await graph.waitFor();
      assert.equal(await graph.locator('g.node.step').count(), 3);
      const schemaNode = graph.locator(`g.node[data-digest="${data.schema.digest}"]`);
      await schemaNode.locator('a').waitFor();
      assert.match((await schemaNode.locator('a').getAttribute('href')) ?? '', new RegExp(`/artifacts/${data.schema.id}/versions/1$`));
      assert.equal(await graph.locator(`g.node.digest.own[data-digest="${data.migration.v2}"]`).count(), 1);
      assert.equal(await graph.locator(`g.node.digest.other[data-digest="${data.report.digest}"]`).count(), 1);
      // Edges input → step → output: three steps, 4 inputs and 3 outputs.
      assert.equal(await graph.locator('path.edge').count(), 7);
      await schemaNode.locator('a').click();
      await page.getByRole('heading', { level: 1, name: /schema\.sql/ }).waitFor();
      await page.getByText('CREATE TABLE users (').waitFor();
      await page.goBack();
      await page.getByTestId('provenance-graph').waitFor();

      // Approve exactly the digest shown.
      await page.getByRole('navigation', { name: 'Artifact views' }).getByRole('link', { name: 'Versions' }).click();
      await page.getByRole('link', { name: 'v2', exact: true }).click();
      await page.getByLabel('Evidence reference').fill('CR-4242');
      await page.getByLabel('Approval expires after').selectOption('30d');
      await page.getByRole('button', { name: /^Approve sha256:/ }).click();
      await page.getByTestId('decision-done').waitFor();
      assert.match(await text(page.getByTestId('decision-done')), /Approval recorded .*\(counted\)\. Version 2 is now APPROVED/);
      await page.getByTestId('version-state').getByText('APPROVED').waitFor();
      assert.equal(await page.getByTestId('decision-panel').count(), 0, 'no decision is offered once approved');
      // The server agrees: the approval binds the digest shown.
      const approvals = (await (
        await fetch(`${alp.url}/v1/artifacts/${data.migration.id}/approvals`, { headers: { authorization: `Bearer ${alp.human.token}` } })
      ).json()) as { approvals: Array<{ evidence_ref: string; content_hash: string; counted: boolean; actor: { kind: string } }> };
      const mine = approvals.approvals.find((a) => a.evidence_ref === 'CR-4242');
      assert.ok(mine);
      assert.equal(mine.content_hash, data.migration.v2);
      assert.equal(mine.counted, true);
      assert.equal(mine.actor.kind, 'human');
      // Back to the list: the PROPOSED queue is empty and APPROVED counts it.
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Artifacts' }).click();
      await page.getByText('No versions in state PROPOSED.').waitFor();
      const approvedTab = page.getByRole('navigation', { name: 'Versions by state' }).getByRole('link', { name: /Approved/ });
      assert.match(await text(approvedTab), /Approved\s*1/);
    } finally {
      await context.close();
    }
  });

  it('opens a 50 MiB log without freezing the page, 256 KiB at a time', async () => {
    const { context, page } = await newPage();
    try {
      // A frame-gap monitor in every document: the longest time the main thread did not paint.
      // (a string: the test's own transpiler would wrap named functions in helpers the page does not have)
      await context.addInitScript(`(() => {
        window.__maxGap = 0;
        let last = performance.now();
        const tick = (t) => { window.__maxGap = Math.max(window.__maxGap, t - last); last = t; requestAnimationFrame(tick); };
        requestAnimationFrame(tick);
      })();`);
      const ranges: Array<{ range: string | null; status: number; length: number }> = [];
      page.on('response', async (r) => {
        if (!r.url().includes(`/v1/executions/${data.bigLog.run}/stdout.log`)) return;
        const h = await r.allHeaders();
        ranges.push({ range: r.request().headers().range ?? null, status: r.status(), length: Number(h['content-length'] ?? -1) });
      });
      const started = Date.now();
      await signIn(page, alp.human.token, `/runs/${data.bigLog.run}/stdout.log`);
      const viewer = page.getByRole('region', { name: 'stdout.log content' });
      await viewer.getByText('00000000 2026-01-01T02:00:00.000Z INFO backup: copied chunk 0').waitFor();
      const opened = Date.now() - started;
      const status = page.locator('.viewer-status');
      await status.getByText(`Showing 262,144 of ${BIG_LOG.toLocaleString('en-US')} bytes`).waitFor();
      // The end, without the middle.
      await page.getByRole('button', { name: 'Load the last 256 KiB' }).click();
      await viewer.getByText(data.bigLog.lastLine).waitFor();
      for (let i = 0; i < 3; i++) {
        await page.getByRole('button', { name: /Load the next/ }).click();
        await status.getByText(`Showing ${((i + 3) * 262_144).toLocaleString('en-US')} of`).waitFor();
      }
      // Still responsive: a round trip into the page is quick, and no frame waited long.
      const t0 = Date.now();
      await page.evaluate(() => 1);
      const roundTrip = Date.now() - t0;
      const maxGap = await page.evaluate(() => window.__maxGap as number);
      await shoot(page, 'output-50mib', 1280);
      assert.ok(opened < 10_000, `the 50 MiB log opened in ${opened} ms`);
      assert.ok(roundTrip < 500, `round trip ${roundTrip} ms`);
      assert.equal(typeof maxGap, 'number');
      assert.ok(maxGap < 1500, `longest frame gap ${Math.round(maxGap)} ms`);
      // Incremental: every request is one range of at most 256 KiB; at most 5 × 256 KiB were transferred.
      assert.ok(ranges.length >= 5, JSON.stringify(ranges));
      for (const r of ranges) {
        assert.match(r.range ?? '', /^bytes=\d+-\d+$/);
        assert.equal(r.status, 206);
        assert.ok(r.length > 0 && r.length <= 262_144, JSON.stringify(r));
      }
      const transferred = ranges.reduce((a, r) => a + r.length, 0);
      assert.ok(transferred <= 5 * 262_144, `transferred ${transferred} bytes`);
      const shownChars = await viewer.evaluate((el) => el.textContent?.length ?? 0);
      assert.ok(shownChars < 2 * 1024 * 1024, `the page holds ${shownChars} characters of the log, not 50 MiB`);
    } finally {
      await context.close();
    }
  });

  it('shows a line diff between two versions of a text artifact', async () => {
    const { context, page } = await newPage();
    try {
      await signIn(page, alp.human.token, `/artifacts/${data.migration.id}/diff`);
      const diff = page.getByTestId('diff');
      await diff.waitFor();
      assert.match(await text(page.locator('.diff-summary')), /\+6 lines added, −5 lines removed/);
      assert.equal(await diff.locator('tr.add').count(), 6);
      assert.equal(await diff.locator('tr.del').count(), 5);
      await diff.locator('tr.add', { hasText: 'CREATE INDEX users_display_name ON users (display_name);' }).waitFor();
      await diff.locator('tr.del', { hasText: 'ALTER TABLE users ADD COLUMN display_name TEXT;' }).waitFor();
      await diff.locator('tr.unchanged-run', { hasText: '3 unchanged lines' }).first().waitFor();
      const gapBox = await diff.locator('tr.unchanged-run').first().boundingBox();
      const before = await diff.locator('tr.eq', { hasText: '% 30 = 7;' }).boundingBox();
      assert.ok(gapBox && before && gapBox.y > before.y, 'the collapsed run is drawn in place');
      // Swap the versions with the selects: the diff follows.
      await page.getByLabel('From version').selectOption('2');
      await page.getByLabel('To version').selectOption('1');
      await page.locator('.diff-summary', { hasText: '+5 lines added, −6 lines removed' }).waitFor();
      assert.match(page.url(), /\/diff\?a=2&b=1$/);
    } finally {
      await context.close();
    }
  });

  it('shows API errors by their problem title and code', async () => {
    const { context, page } = await newPage();
    try {
      await page.goto(`${alp.url}/`);
      await page.getByLabel('Access token').fill('alp_not-a-real-token');
      await page.getByRole('button', { name: 'Sign in' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      assert.match(await text(alert), /Unauthorized|Unauthenticated/i);
      assert.match(await text(alert), /UNAUTHENTICATED/);
      await page.getByLabel('Access token').fill(alp.human.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      await page.goto(`${alp.url}/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV`);
      await page.getByRole('heading', { name: 'Artifact not available' }).waitFor();
      const problem = await text(page.getByRole('alert'));
      assert.match(problem, /Not found/);
      assert.match(problem, /NOT_FOUND/);
      await page.goto(`${alp.url}/artifacts/not-an-id`);
      assert.match(await text(page.getByRole('alert')), /INVALID/);
    } finally {
      await context.close();
    }
  });

  it('renders every view at 1280 and 390 px with no serious accessibility violation', async () => {
    // A proposal that stays open, for the approval form.
    const auth = { authorization: `Bearer ${alp.agent.token}` };
    const created = await fetch(`${alp.url}/v1/artifacts?name=rollout-flags&filename=flags.json&kind=config`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/octet-stream' },
      body: JSON.stringify({ new_checkout: { enabled: true, percent: 25 }, dark_mode: { enabled: false } }),
    });
    const pending = ((await created.json()) as { artifact_id: string }).artifact_id;
    const proposed = await fetch(`${alp.url}/v1/artifacts/${pending}/versions/1/transitions`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ to: 'PROPOSED' }),
    });
    assert.equal(proposed.status, 200);
    const views: Array<{ name: string; path: string; ready: (p: Page) => Promise<unknown> }> = [
      { name: 'artifacts-by-state', path: '/artifacts?state=EXECUTED', ready: (p) => p.getByRole('table').waitFor() },
      { name: 'artifacts-all', path: '/artifacts?state=ALL', ready: (p) => p.getByRole('button', { name: 'Next page →' }).waitFor() },
      { name: 'artifacts-search', path: '/artifacts?name=deploy-api', ready: (p) => p.getByRole('link', { name: 'deploy-api' }).waitFor() },
      {
        name: 'artifacts-search-server',
        path: '/artifacts?prefix=note-&label=&state=DRAFT',
        ready: (p) => p.getByRole('button', { name: 'Load more' }).waitFor(),
      },
      {
        name: 'artifact-versions',
        path: `/artifacts/${data.deploy.id}`,
        ready: (p) => p.getByRole('heading', { name: 'Compensations' }).waitFor(),
      },
      {
        name: 'version-content',
        path: `/artifacts/${data.migration.id}/versions/2`,
        ready: (p) => p.getByText('sha256 recomputed in this browser matches').waitFor(),
      },
      {
        name: 'version-approve',
        path: `/artifacts/${pending}/versions/1`,
        ready: (p) => p.getByRole('button', { name: /^Approve sha256:/ }).waitFor(),
      },
      {
        name: 'version-compensated',
        path: `/artifacts/${data.deploy.id}/versions/1`,
        ready: (p) =>
          p
            .getByRole('region', { name: /deploy\.sh/ })
            .getByText('kubectl')
            .waitFor(),
      },
      { name: 'history', path: `/artifacts/${data.deploy.id}/history`, ready: (p) => p.locator('ol.timeline li').first().waitFor() },
      { name: 'approvals', path: `/artifacts/${data.migration.id}/approvals`, ready: (p) => p.getByText('CR-4242').waitFor() },
      { name: 'executions', path: `/artifacts/${data.deploy.id}/executions`, ready: (p) => p.locator('.card').first().waitFor() },
      { name: 'run', path: `/runs/${data.deploy.runFailed}`, ready: (p) => p.getByText('exceeded its progress deadline').waitFor() },
      { name: 'output-log', path: `/runs/${data.bigLog.run}/stdout.log`, ready: (p) => p.getByText('copied chunk 0 ').waitFor() },
      { name: 'provenance', path: `/artifacts/${data.migration.id}/provenance`, ready: (p) => p.getByTestId('provenance-graph').waitFor() },
      { name: 'diff', path: `/artifacts/${data.migration.id}/diff`, ready: (p) => p.getByTestId('diff').waitFor() },
      { name: 'archive', path: `/artifacts/${data.archived.id}`, ready: (p) => p.getByText('copied and verified').waitFor() },
      { name: 'operations', path: '/operations', ready: (p) => p.getByTestId('telemetry-accepted').waitFor() },
      { name: 'not-found', path: '/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV', ready: (p) => p.getByRole('alert').waitFor() },
    ];
    const report: string[] = [];
    // The dark scheme: the views whose colours differ most (badges, diff, graph, viewer, forms, problems).
    const darkViews = new Set([
      'artifacts-by-state',
      'version-content',
      'version-approve',
      'history',
      'approvals',
      'run',
      'provenance',
      'diff',
      'operations',
      'not-found',
    ]);
    const passes = [...WIDTHS.map((width) => ({ width, dark: false })), { width: WIDTHS[0], dark: true }];
    for (const { width, dark } of passes) {
      const { context, page } = await newPage(width);
      const suffix = dark ? '-dark' : '';
      try {
        if (dark) await page.emulateMedia({ colorScheme: 'dark' });
        await page.goto(`${alp.url}/`);
        await page.getByLabel('Access token').waitFor();
        await check(page, `signin${suffix}`, width, report);
        await page.getByLabel('Access token').fill(alp.human.token);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('button', { name: 'Sign out' }).waitFor();
        for (const v of views) {
          if (dark && !darkViews.has(v.name)) continue;
          await page.goto(`${alp.url}${v.path}`);
          await v.ready(page);
          await check(page, `${v.name}${suffix}`, width, report);
        }
      } finally {
        await context.close();
      }
    }
    const files = fs.readdirSync(SCREENSHOTS).filter((f) => f.endsWith('.png'));
    assert.ok(files.length >= (views.length + 1) * WIDTHS.length + darkViews.size + 1, files.join(', '));
    if (report.length) console.log(`axe (moderate/minor, not failing):\n${report.join('\n')}`);
  });

  it('works with the keyboard alone: skip link, sign-in, finding a proposal, approving it', async () => {
    const { context, page } = await newPage();
    try {
      const focused = () =>
        page.evaluate(() => {
          const el = document.activeElement as unknown as { tagName: string; textContent: string | null; id: string } | null;
          return el ? { tag: el.tagName, text: (el.textContent ?? '').trim(), id: el.id } : null;
        });
      const tabTo = async (want: (f: { tag: string; text: string; id: string }) => boolean, what: string) => {
        for (let i = 0; i < 80; i++) {
          await page.keyboard.press('Tab');
          const f = await focused();
          if (f && want(f)) return;
        }
        assert.fail(`Tab never reached ${what}`);
      };
      const outlined = () =>
        page.evaluate(() => {
          const el = document.activeElement as unknown as object;
          const style = (
            globalThis as unknown as { getComputedStyle(e: object): { outlineStyle: string; outlineWidth: string } }
          ).getComputedStyle(el);
          return style.outlineStyle !== 'none' && style.outlineWidth !== '0px';
        });
      await page.goto(`${alp.url}/`);
      await page.getByLabel('Access token').waitFor();
      await page.keyboard.press('Tab');
      assert.equal((await focused())?.text, 'Skip to content');
      assert.ok(await outlined(), 'the focused link shows where the focus is');
      await page.keyboard.press('Enter');
      assert.equal((await focused())?.id, 'main');
      await tabTo((f) => f.id === 'token', 'the token field');
      await page.keyboard.type(alp.human.token);
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      await page.getByRole('heading', { level: 1, name: 'Proposed versions' }).waitFor();
      assert.equal((await focused())?.tag, 'H1', 'a new page takes the focus to its heading');
      await tabTo((f) => f.tag === 'A' && f.text === 'rollout-flags', 'the proposal');
      assert.ok(await outlined());
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { level: 1, name: /rollout-flags/ }).waitFor();
      await tabTo((f) => f.id === 'evidence', 'the evidence field');
      await page.keyboard.type('KB-1');
      await tabTo((f) => f.tag === 'BUTTON' && f.text.startsWith('Approve sha256:'), 'the Approve button');
      assert.ok(await outlined());
      await page.keyboard.press('Enter');
      await page.getByTestId('decision-done').waitFor();
      assert.match(await text(page.getByTestId('decision-done')), /Version 1 is now APPROVED/);
    } finally {
      await context.close();
    }
  });

  reviewTests(env);
  toolTests(env);

  it('keeps the token out of URLs, cookies, localStorage and the server log; no page error', async () => {
    for (const t of [alp.human.token, alp.agent.token]) {
      assert.ok(!requestedUrls.some((u) => u.includes(t)), 'a URL carried a token');
      assert.ok(!alp.logs().includes(t), 'the server log carries a token');
    }
    assert.ok(requestedUrls.length > 50);
    // Verified downloads are saved from blob: URLs of the page's own origin (bytes already in the page).
    const fetched = requestedUrls.filter((u) => !u.startsWith(`blob:${alp.url}/`));
    assert.ok(!fetched.some((u) => !u.startsWith(alp.url)), 'every request goes to the ALP server itself');
    const paths = fetched.map((u) => new URL(u).pathname);
    const outside = paths.filter((p) => !/^\/(v1|assets|artifacts|runs)\/|^\/(artifacts|operations|signin|favicon\.svg)?$/.test(p));
    assert.deepEqual(outside, [], 'the page loads its own files and talks only to /v1');
    const { context, page } = await newPage();
    try {
      await signIn(page, alp.human.token);
      assert.equal(await page.evaluate(() => localStorage.length), 0);
      assert.equal(await page.evaluate(() => document.cookie), '');
      assert.equal((await context.cookies()).length, 0);
      assert.equal(await page.evaluate(() => sessionStorage.getItem('alp.token')), alp.human.token);
    } finally {
      await context.close();
    }
    assert.deepEqual(pageErrors, []);
  });

  async function shoot(page: Page, name: string, width: number): Promise<void> {
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-${width}.png`), fullPage: true });
  }

  async function check(page: Page, name: string, width: number, report: string[]): Promise<void> {
    await shoot(page, name, width);
    const violations = await axe(page);
    const bad = serious(violations);
    assert.deepEqual(
      bad.map((v) => `${v.id} (${v.impact}): ${v.help} — ${JSON.stringify(v.nodes)}`),
      [],
      `${name} at ${width}px has serious accessibility violations`,
    );
    for (const v of violations) report.push(`${name}@${width}: ${v.id} (${v.impact}) ${v.help} × ${v.nodes.length}`);
    // Nothing wider than the viewport but the regions made to scroll.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 1, `${name} at ${width}px overflows the viewport by ${overflow}px`);
  }
});
