/**
 * Issue 14 item 7: principal ids that differ only by case (or Unicode form) are one principal. Token
 * creation refuses the second spelling; quorum counting counts distinct normalised humans, also for
 * data written before the rule (two spellings already stored). Both metadata profiles: SQLite and
 * DynamoDB Local (content on the filesystem in both; the rule is in the item store).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { Conflict } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { principalKey } from '../../src/lifecycle/principal-key.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { freshDynamoTable, stopSharedDynamoLocal } from '../helpers/dynamodb-local.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';

after(stopSharedDynamoLocal);

const profiles: Array<[string, () => Promise<ItemStore>]> = [
  ['sqlite', async () => new SqliteItemStore(path.join(tempDir('alp-pid'), 'alp.db'))],
  ['dynamodb', () => freshDynamoTable('pid')],
];

async function contextOn(open: () => Promise<ItemStore>): Promise<ServiceContext> {
  const items = await open();
  const content = await FsContentStore.open(path.join(tempDir('alp-pid-c'), 'content'));
  return createContext({ items, content, clock: new ManualClock('2026-03-01T12:00:00.000Z') });
}

describe('issue 14 item 7: principal ids are normalised', () => {
  it('issue 14 item 7: one normalisation (NFKC + case folding)', () => {
    assert.equal(principalKey('Ops-Lead'), principalKey('ops-lead'));
    assert.equal(principalKey('OPS-LEAD'), 'ops-lead');
    assert.notEqual(principalKey('ops-lead'), principalKey('ops-lead2'));
  });

  for (const [name, open] of profiles) {
    it(`issue 14 item 7 (${name}): a look-alike id is refused and two spellings count as one approver`, async () => {
      const ctx = await contextOn(open);
      try {
        await createToken(ctx, { principal: 'ops-lead', kind: 'human' }, alice);
        for (const lookAlike of ['Ops-Lead', 'OPS-LEAD'])
          await assert.rejects(createToken(ctx, { principal: lookAlike, kind: 'human' }, alice), (e: unknown) => e instanceof Conflict);
        // The same spelling gets another token.
        assert.equal((await createToken(ctx, { principal: 'ops-lead', kind: 'human' }, alice)).principal.id, 'ops-lead');

        // Quorum 2: approvals by two spellings of one human (as data written before the rule could
        // hold) leave the version PROPOSED; a second, distinct human approves it.
        const { version } = await createArtifact(ctx, agent, { name: 'q', filename: 'q.sh', quorum: 2, body: bytesOf('q\n') });
        const id = version.artifact_id;
        await propose(ctx, agent, id, 1);
        const approve = (who: string) => decide(ctx, { id: who, kind: 'human' }, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-7' });
        assert.equal((await approve('ops-lead')).version.state, 'PROPOSED');
        const second = await approve('Ops-Lead');
        assert.equal(second.approval.counted, false, 'the second spelling is not a second human');
        assert.equal(second.version.state, 'PROPOSED');
        assert.equal((await approve('alice')).version.state, 'APPROVED');
      } finally {
        await ctx.items.close();
        await ctx.content.close();
      }
    });
  }
});
