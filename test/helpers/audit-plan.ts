/** Audit plans the suites commit directly (commitAudited), bypassing the lifecycle. */
import type { AuditPlan } from '../../src/audit/chain.ts';
import { transitionSk } from '../../src/core/keys.ts';
import { agent } from './walk.ts';

/** `n` transition entries on one chain, as one commit; each entry's note is `${tag} ${i}`. */
export function bulkAuditPlan(artifactId: string, n: number, tag = 'bulk'): AuditPlan {
  return {
    chains: [
      {
        artifactId,
        entries: Array.from({ length: n }, (_, i) => ({
          type: 'transition' as const,
          keys: (seq: number, ts: string) => ({ SK: transitionSk(ts, seq) }),
          fields: { version: 1, from: 'DRAFT', to: 'DRAFT', actor: agent.id, note: `${tag} ${i}` },
        })),
      },
    ],
  };
}
