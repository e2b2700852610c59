/**
 * Issue 19 items 9 and 10 in the browser: an approval that does not count (wrong digest, expired when
 * given) says so, with its reason, in the approvals tab, the history and on the version page, and
 * the long reason does not widen the page; the review page shows the change against the previous
 * version inline, a provenance summary, and the comment given with a decision.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Page } from 'playwright-core';
import { type E2eEnv, text } from './env.ts';

const overflow = (page: Page) =>
  page.evaluate(() => {
    const root = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document
      .documentElement;
    return root.scrollWidth - root.clientWidth;
  });

export function reviewTests(env: E2eEnv): void {
  it('shows an approval that does not count as not counted, with its reason, in the approvals tab, the history and the version page', async () => {
    const { context, page } = await env.newPage(1280);
    try {
      const { migration } = env.data();
      await env.signIn(page, env.alp().human.token, `/artifacts/${migration.id}/approvals`);
      const wrong = page.locator('tr.decision-row', { hasText: 'WRONG-DIGEST' });
      await wrong.waitFor();
      assert.match(
        await text(wrong.getByTestId('standing')),
        /^not counted: binds sha256:[0-9a-f]{12}…, not the version's content sha256:[0-9a-f]{12}…$/,
      );
      // The digests are shown short; the full values stay in their titles (and a copy button).
      const titles = await wrong
        .getByTestId('standing')
        .locator('code.digest')
        .evaluateAll((els) => els.map((e) => e.getAttribute('title')));
      assert.deepEqual(titles, [migration.v1, migration.v2]);
      assert.equal(await wrong.locator('.decision-void').count(), 1, 'not drawn as an approval that counts');
      assert.equal(await wrong.locator('.decision-approve').count(), 0);
      const expired = page.locator('tr.decision-row', { hasText: 'EXPIRED-1' });
      assert.equal(await text(expired.getByTestId('standing')), 'not counted: expired when given');
      assert.equal(await text(page.locator('tr.decision-row', { hasText: 'REVIEW-7' }).getByTestId('standing')), 'rejection');
      // The long reason wraps: the page is no wider than the window, at 1280 px and at 390 px.
      assert.ok((await overflow(page)) <= 0, `the approvals tab overflows by ${await overflow(page)} px at 1280`);
      await page.setViewportSize({ width: 390, height: 900 });
      assert.ok((await overflow(page)) <= 0, `the approvals tab overflows by ${await overflow(page)} px at 390`);
      await page.setViewportSize({ width: 1280, height: 900 });

      // History: the same two entries say "not counted", not "approved".
      await page.getByRole('navigation', { name: 'Artifact views' }).getByRole('link', { name: 'History' }).click();
      const entry = page.locator('li.entry-approval', { hasText: 'WRONG-DIGEST' });
      await entry.waitFor();
      assert.equal(await text(entry.locator('.entry-head strong')), 'v2 approval not counted');
      assert.match((await entry.getAttribute('class')) ?? '', /standing-not-counted/);
      assert.match(await text(entry.getByTestId('standing')), /^not counted: binds sha256:/);
      const expiredEntry = page.locator('li.entry-approval', { hasText: 'EXPIRED-1' });
      assert.equal(await text(expiredEntry.locator('.entry-head strong')), 'v2 approval not counted');
      assert.equal(await text(page.locator('li.entry-approval', { hasText: 'REVIEW-7' }).locator('.entry-head strong')), 'v1 rejected');

      // The version page lists them as not counted too, and v1 shows the comment given with its rejection.
      await page.goto(`${env.alp().url}/artifacts/${migration.id}/versions/2`);
      const decision = page.getByTestId('decision').filter({ hasText: 'WRONG-DIGEST' });
      await decision.waitFor();
      assert.match(await text(decision), /^Approval by .*not counted: binds sha256:/);
      await page.goto(`${env.alp().url}/artifacts/${migration.id}/versions/1`);
      const rejected = page.getByTestId('decision').filter({ hasText: 'REVIEW-7' });
      await rejected.waitFor();
      assert.match(await text(rejected), /^Rejected by /);
      assert.equal(await text(rejected.getByTestId('decision-comment')), 'Comment: needs a default and an index');
    } finally {
      await context.close();
    }
  });

  it('shows the change against the previous version and a provenance summary on the review page', async () => {
    const { context, page } = await env.newPage(1280);
    try {
      const { migration, schema } = env.data();
      await env.signIn(page, env.alp().human.token, `/artifacts/${migration.id}/versions/2`);
      const changes = page.getByTestId('changes');
      await changes.getByTestId('diff').waitFor();
      assert.match(await text(changes.getByRole('heading', { level: 2 })), /^Changes since v1 \(REJECTED\)$/);
      assert.match(await text(changes.locator('.diff-summary')), /\+6 lines added, −5 lines removed/);
      assert.equal(await changes.locator('tr.add').count(), 6);
      await changes.locator('tr.add', { hasText: 'CREATE INDEX users_display_name ON users (display_name);' }).waitFor();
      // Provenance: made by step 2 (revise) from v1 and schema.sql v1; used by step 3 (lint).
      const made = page.getByTestId('provenance-made');
      await made.waitFor();
      assert.equal(await made.count(), 1);
      assert.match(await text(made), /^Step 2: revise recorded by /);
      assert.match(await text(made), /claimed actor: model-x/);
      await made.getByRole('link', { name: 'this artifact, v1' }).waitFor();
      const schemaLink = made.getByRole('link', { name: 'schema.sql v1' });
      await schemaLink.waitFor();
      assert.match((await schemaLink.getAttribute('href')) ?? '', new RegExp(`/artifacts/${schema.id}/versions/1$`));
      const used = page.getByTestId('provenance-used');
      assert.match(await text(used), /^Step 3: lint /);
      await used.getByRole('link', { name: 'migrate-users lint report v1' }).waitFor();
      // A first version has nothing to compare with; its own provenance says what made it.
      await page.goto(`${env.alp().url}/artifacts/${schema.id}/versions/1`);
      await page.getByTestId('provenance-summary').waitFor();
      assert.equal(await page.getByTestId('changes').count(), 0);
    } finally {
      await context.close();
    }
  });
}
