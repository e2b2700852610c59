/**
 * Issue 3 figures: transitions per second through the library on SQLite (synchronous=FULL), each a
 * full transaction with its audit entry and HEAD update; one caller, then 8 concurrent callers on 8
 * artifacts. Reference: bare SQLite transactions of the same shape measured in the same run.
 */

import fs from 'node:fs/promises';
import path from 'node:path';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { systemClock } from '../src/core/clock.ts';
import { createArtifact } from '../src/lifecycle/artifacts.ts';
import { propose, transition } from '../src/lifecycle/transitions.ts';
import { createContext } from '../src/runtime/context.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { benchDir, fmt, header, row, timed } from './util.ts';

const agent = { id: 'bench', kind: 'agent' as const };

export async function benchLifecycle(opts: { count?: number } = {}): Promise<Record<string, number>> {
  const count = opts.count ?? 4000;
  const dir = benchDir('lifecycle');
  try {
    const items = new SqliteItemStore(path.join(dir, 'alp.db'));
    const content = await FsContentStore.open(path.join(dir, 'content'));
    const ctx = createContext({ items, content, clock: systemClock });
    header(`lifecycle: ${fmt(count)} transitions (PROPOSED ⇄ DRAFT), SQLite synchronous=FULL`);

    const ref = await timed(async () => {
      for (let i = 0; i < count; i++) {
        await items.transactWrite([
          { op: 'update', key: { PK: 'REF', SK: 'V' }, update: { set: { state: i % 2 ? 'A' : 'B' }, add: { row_version: 1 } } },
          { op: 'put', item: { PK: 'REF', SK: `T#${i}`, GSI1PK: 'D', GSI1SK: `#${i}`, payload: 'x'.repeat(300) } },
          { op: 'update', key: { PK: 'REF', SK: 'HEAD' }, update: { add: { seq: 1 } } },
          { op: 'check', key: { PK: 'SYS', SK: 'FENCE' }, condition: { kind: 'attrNotExists', attr: 'holder' } },
        ]);
      }
    });
    const refRate = count / (ref.ms / 1000);
    row('reference: bare 4-operation SQLite transactions', `${fmt(refRate)} /s`);

    const { version } = await createArtifact(ctx, agent, { name: 'bench', filename: 'f', body: [Buffer.from('x')] });
    const one = await timed(async () => {
      for (let i = 0; i < count; i++) {
        if (i % 2 === 0) await propose(ctx, agent, version.artifact_id, 1);
        else await transition(ctx, agent, version.artifact_id, 1, 'DRAFT');
      }
    });
    const oneRate = count / (one.ms / 1000);
    row('transitions/s, one caller', `${fmt(oneRate)} /s`, `${fmt((100 * oneRate) / refRate)}% of the reference (target >= 3,000/s)`);

    const ids: string[] = [];
    for (let i = 0; i < 8; i++)
      ids.push((await createArtifact(ctx, agent, { name: `b${i}`, filename: 'f', body: [Buffer.from('x')] })).version.artifact_id);
    const per = Math.floor(count / 8);
    const eight = await timed(() =>
      Promise.all(
        ids.map(async (id) => {
          for (let i = 0; i < per; i++) {
            if (i % 2 === 0) await propose(ctx, agent, id, 1);
            else await transition(ctx, agent, id, 1, 'DRAFT');
          }
        }),
      ),
    );
    const eightRate = (per * 8) / (eight.ms / 1000);
    row('transitions/s, 8 concurrent callers (8 artifacts)', `${fmt(eightRate)} /s`);
    await items.close();
    return { ref_tx_per_s: refRate, transitions_per_s: oneRate, transitions_8_per_s: eightRate };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
