/**
 * Aliases (`@prod`) and search over HTTP (issue 20 item 6): each handler calls the one service
 * function (lifecycle/aliases.ts, lifecycle/search.ts).
 */
import { listAliases, removeAlias, setAlias } from '../../lifecycle/aliases.ts';
import { searchArtifacts } from '../../lifecycle/search.ts';
import { parseLabel } from '../../lifecycle/validation.ts';
import { principalOf } from '../auth.ts';
import { CONTRACT } from '../contract.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';

export function aliasAndSearchRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'listAliases',
      summary: 'The aliases of an artifact (`@prod` …), each with its version’s current state',
      tags: ['aliases'],
      schema: CONTRACT.listAliases.schema,
      handler: async (req) => ({ artifact_id: req.params.id, aliases: await listAliases(ctx, req.params.id) }),
    }),
    defineRoute({
      id: 'setAlias',
      summary: 'Set or move an alias to an APPROVED or EXECUTED version (humans only; an audit entry)',
      description:
        'Wherever a version is taken (`/versions/@prod/content`, transitions, executions…), `@name` then names that version. A version that later moves on stays aliased.',
      tags: ['aliases'],
      schema: CONTRACT.setAlias.schema,
      handler: async (req) => setAlias(ctx, principalOf(req), req.params.id, req.params.name, req.body.version, req.body.reason),
    }),
    defineRoute({
      id: 'removeAlias',
      summary: 'Remove an alias (humans only; an audit entry)',
      tags: ['aliases'],
      schema: CONTRACT.removeAlias.schema,
      handler: async (req) => removeAlias(ctx, principalOf(req), req.params.id, req.params.name, req.query.reason),
    }),
    defineRoute({
      id: 'search',
      summary: 'Search artifacts by name prefix, labels (key=value, all must match) and state, paginated',
      description:
        'With `state`, hits are versions in that state (the state index); without, artifacts (the search index, in name order). A page reads at most 1000 index items: a filtered page may hold fewer hits than `limit` and still have a `cursor`.',
      tags: ['queries'],
      schema: CONTRACT.search.schema,
      handler: async (req) => {
        const q = req.query;
        const labels = Object.fromEntries((q.label ?? []).map(parseLabel));
        return searchArtifacts(ctx, { namePrefix: q.name_prefix, labels, state: q.state, limit: q.limit, cursor: q.cursor });
      },
    }),
  ];
}
