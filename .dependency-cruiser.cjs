/**
 * The layer rules of docs/design.md, enforced by `npm run lint` (dependency-cruiser over src/):
 *
 *   entry points  src/cli/ src/api/ src/web/      parse, authenticate, call services, render
 *                 src/mcp/                        the MCP tools (served by cli/ on stdio, api/ at /mcp)
 *   runtime       src/runtime/                    opens an installation, registers the services' hooks
 *   services      src/{lifecycle,audit,telemetry,retention,recovery,webhooks}/   the rules
 *   system        src/system/                     installation-wide state (beside the contracts)
 *   contracts     src/store/*.ts src/content/*.ts ItemStore, ContentStore (+ open.ts picks the engine)
 *   engines       src/store/{sqlite,dynamodb}/ src/content/{fs,s3}/
 *   core          src/core/                       ids, clock, digests, errors, keys, shared models
 *
 * A layer imports only layers below it. Services import each other only through the named edges of
 * SERVICE_EDGES (acyclic: telemetry <- audit <- lifecycle <- recovery <- retention, lifecycle <- webhooks); everything else a
 * service needs from another reaches it through a registration on the context, made in runtime/
 * (audit sinks, publish checks, recovery steps). No file cycles, no lazy imports to dodge one.
 */
const SERVICES = ['audit', 'lifecycle', 'retention', 'recovery', 'telemetry', 'webhooks'];
const ENGINES = '^src/(store/(sqlite|dynamodb)|content/(fs|s3))/';

/** Which service may import which other service, and why. Anything not listed is refused. */
const SERVICE_EDGES = {
  // The audit append counter and `audit verify --all` read the telemetry queue's state item (its
  // per-event record of audit appends) to cross-check the chains.
  audit: ['telemetry'],
  // Every lifecycle change is written through the audit chain (runAudited/commitAudited) and reads
  // history and the chained policy from it.
  lifecycle: ['audit'],
  // Backup, restore and reconcile read artifacts through the lifecycle (references, content checks,
  // provenance), verify the chains and the append counter (audit), and reset the telemetry queue of a
  // restored installation.
  recovery: ['audit', 'lifecycle', 'telemetry'],
  // Retention's reference scan covers every reference source: the lifecycle's items, the audit chain's
  // archived objects, and the backups in the registry (recovery/backup, backup-format); a restore
  // proof is read from the reconciliation that verified it (recovery/reconcile).
  retention: ['audit', 'lifecycle', 'recovery'],
  // The telemetry outbox depends on no other service (it is plugged into the audit chain as a sink).
  telemetry: [],
  // Webhooks export the telemetry outbox (claim, acknowledge, defer), read the audit entry an outbox
  // record names and record endpoint changes in a hash-chained log (audit), and check the access
  // table (lifecycle).
  webhooks: ['audit', 'lifecycle', 'telemetry'],
};

const serviceRules = SERVICES.map((from) => {
  const refused = SERVICES.filter((s) => s !== from && !SERVICE_EDGES[from].includes(s));
  return {
    name: `service-edges-${from}`,
    comment: `${from}/ may import ${SERVICE_EDGES[from].join(', ') || 'no other service'} (SERVICE_EDGES); reach the others through a registration made in runtime/`,
    severity: 'error',
    from: { path: `^src/${from}/` },
    to: { path: `^src/(${refused.join('|')})/` },
  };
}).filter((r) => !r.to.path.includes('()'));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycles between files (and so none between folders).',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-lazy-imports',
      comment: 'No dynamic import() inside src/ except where a contract opens its engine (store/open.ts, content/open.ts).',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(store|content)/open\\.ts$' },
      to: { dynamic: true },
    },
    {
      name: 'core-is-the-bottom',
      comment: 'core/ imports nothing else of src/.',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
    },
    {
      name: 'contracts-on-core',
      comment: 'A contract (store/, content/) and its engines depend only on core/ and their own contract.',
      severity: 'error',
      from: { path: '^src/(store|content)/' },
      to: { path: '^src/', pathNot: '^src/(core|$1)/' },
    },
    {
      name: 'engines-behind-their-contract',
      comment: "Engine modules are imported only by their own contract's open.ts, runtime/ and the engine itself.",
      severity: 'error',
      from: { pathNot: ['^src/(store|content)/open\\.ts$', '^src/runtime/', ENGINES] },
      to: { path: ENGINES },
    },
    {
      name: 'engines-stay-apart',
      comment: 'An engine does not import another engine.',
      severity: 'error',
      from: { path: '^src/(store|content)/([^/]+)/' },
      to: { path: ENGINES, pathNot: '^src/$1/$2/' },
    },
    {
      name: 'system-beside-the-contracts',
      comment: 'system/ (installation-wide state) depends only on core/ and the contracts, never on a service.',
      severity: 'error',
      from: { path: '^src/system/' },
      to: { path: '^src/', pathNot: ['^src/(core|system)/', '^src/(store|content)/[^/]+\\.ts$'] },
    },
    {
      name: 'services-below-runtime',
      comment: 'Services, system/, contracts and core/ never import runtime/ or an entry point.',
      severity: 'error',
      from: { path: `^src/(${SERVICES.join('|')}|system|store|content|core)/` },
      to: { path: '^src/(runtime|cli|api|web|mcp)/' },
    },
    {
      name: 'runtime-below-entry-points',
      comment: 'runtime/ is used by the entry points and never imports one.',
      severity: 'error',
      from: { path: '^src/runtime/' },
      to: { path: '^src/(cli|api|web|mcp)/' },
    },
    {
      name: 'mcp-below-its-servers',
      comment: 'The MCP tools (mcp/) call services; the CLI (stdio) and the HTTP server (/mcp) serve them, never the reverse.',
      severity: 'error',
      from: { path: '^src/mcp/' },
      to: { path: '^src/(cli|api|web|runtime)/' },
    },
    {
      name: 'entry-points-apart',
      comment: 'The HTTP server and the web UI do not import the CLI (the CLI may start the server).',
      severity: 'error',
      from: { path: '^src/(api|web)/' },
      to: { path: '^src/cli/' },
    },
    ...serviceRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // The browser UI's .tsx components (src/web/app) are left out: dependency-cruiser drives swc
    // without JSX. Its .ts modules (API client, libs) are checked like the rest.
    exclude: { path: ['(^|/)(node_modules|dist)/', '^src/web/app/.*\\.tsx$'] },
    tsConfig: { fileName: 'tsconfig.json' },
    // TypeScript 7 has no compiler API; swc parses the sources, type-only imports included.
    parser: 'swc',
    tsPreCompilationDeps: true,
    moduleSystems: ['es6'],
  },
};
