/**
 * The GSI1 access patterns of RFC-012 §9.1 (paginated listings; eventually consistent on DynamoDB),
 * and who the caller is.
 */
import { type IndexQuery, queryIndex } from '../../lifecycle/queries.ts';
import type { RouteId } from '../access.ts';
import { principalOf } from '../auth.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';
import { ApproverQuery, DateQuery, Page, StateQuery, WhoAmI } from '../schemas.ts';

export function queryRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  const patterns: Array<[RouteId, IndexQuery, typeof DateQuery | typeof ApproverQuery | typeof StateQuery, string, string]> = [
    ['queryTransitions', 'transitions', DateQuery, 'date', 'Transitions on a day'],
    ['queryApprovals', 'approvals', ApproverQuery, 'approver', 'Approvals and rejections by a principal'],
    ['queryRuns', 'runs', DateQuery, 'date', 'Executions started on a day'],
    ['queryProvenance', 'provenance', DateQuery, 'date', 'Provenance steps recorded on a day'],
    ['queryCompensations', 'compensations', StateQuery, 'state', 'Compensations by the state of their artifact'],
  ];
  return [
    defineRoute({
      id: 'whoami',
      summary: 'The principal the bearer token stands for',
      tags: ['principals'],
      schema: { response: { 200: WhoAmI } },
      handler: async (req) => ({ principal: principalOf(req) }),
    }),
    ...patterns.map(([id, kind, query, key, summary]) =>
      defineRoute({
        id,
        summary: `${summary} (GSI1, paginated)`,
        tags: ['queries'],
        schema: { querystring: query, response: { 200: Page } },
        handler: async (req) => {
          const q = req.query as Record<string, unknown> & { limit?: number; cursor?: string };
          return queryIndex(ctx, kind, String(q[key]), { limit: q.limit, cursor: q.cursor });
        },
      }),
    ),
  ];
}
