/**
 * The GSI1 access patterns of RFC-012 §9.1 (paginated listings; eventually consistent on DynamoDB),
 * and who the caller is.
 */
import { type IndexQuery, queryIndex } from '../../lifecycle/queries.ts';
import { principalOf } from '../auth.ts';
import { CONTRACT } from '../contract.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';

type QueryRouteId = 'queryTransitions' | 'queryApprovals' | 'queryRuns' | 'queryProvenance' | 'queryCompensations';

export function queryRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  const patterns: Array<[QueryRouteId, IndexQuery, string, string]> = [
    ['queryTransitions', 'transitions', 'date', 'Transitions on a day'],
    ['queryApprovals', 'approvals', 'approver', 'Approvals and rejections by a principal'],
    ['queryRuns', 'runs', 'date', 'Executions started on a day'],
    ['queryProvenance', 'provenance', 'date', 'Provenance steps recorded on a day'],
    ['queryCompensations', 'compensations', 'state', 'Compensations by the state of their artifact'],
  ];
  return [
    defineRoute({
      id: 'whoami',
      summary: 'The principal the bearer token stands for',
      tags: ['principals'],
      schema: CONTRACT.whoami.schema,
      handler: async (req) => ({ principal: principalOf(req) }),
    }),
    ...patterns.map(([id, kind, key, summary]) =>
      defineRoute({
        id,
        summary: `${summary} (GSI1, paginated)`,
        tags: ['queries'],
        schema: CONTRACT[id].schema,
        handler: async (req) => {
          const q = req.query as Record<string, unknown> & { limit?: number; cursor?: string };
          return queryIndex(ctx, kind, String(q[key]), { limit: q.limit, cursor: q.cursor });
        },
      }),
    ),
  ];
}
