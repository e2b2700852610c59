/**
 * The web UI's static files (built by `vite build` into dist/web) served at `/`, beside the API. The
 * files are read once when the server starts and only those are served: a request names an entry of
 * that table or gets a 404 problem, so no path from a request ever reaches the filesystem (no
 * traversal, no symlinks followed). Client routes of the single-page app answer its index.html;
 * /v1, /healthz, /metrics, /openapi.json and /docs keep their own routes, and every other path still
 * gets the API's problem+json 404.
 *
 * Caching: files under assets/ carry a content hash in their name (Vite), so they are immutable for a
 * year; index.html and the other files are revalidated (`no-cache` with a strong ETag).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HttpProblem } from './problem.ts';

/** Paths of the single-page app's own routes: they all answer index.html (the app routes on the client). */
export const CLIENT_ROUTES = ['/signin', '/artifacts', '/artifacts/*', '/runs/*', '/operations'] as const;

const MAX_FILES = 2000;
const MAX_TOTAL_BYTES = 64 * 1024 * 1024;

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webp': 'image/webp',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};

/**
 * The page may load its own scripts, styles and images and talk to this origin only: no CDN, no
 * inline script, no framing.
 */
export const WEB_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

interface WebFile {
  body: Buffer;
  type: string;
  etag: string;
  immutable: boolean;
}

/** Where `npm run build` puts the UI: dist/web, found from this file in src/api or dist/api. */
export function defaultWebRoot(): string {
  const here = import.meta.dirname;
  const parent = path.dirname(here);
  return path.basename(parent) === 'dist' ? path.join(parent, 'web') : path.join(parent, '..', 'dist', 'web');
}

/** Reads every regular file under `root` (no symlinks), keyed by its URL path ("/assets/x.js"). */
export function loadWebFiles(root: string): Map<string, WebFile> {
  const files = new Map<string, WebFile>();
  let total = 0;
  const walk = (dir: string, prefix: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (entry.name.startsWith('.')) continue;
      const abs = path.join(dir, entry.name);
      const url = `${prefix}/${entry.name}`;
      if (entry.isDirectory()) walk(abs, url);
      else if (entry.isFile()) {
        const type = TYPES[path.extname(entry.name).toLowerCase()];
        if (!type) continue;
        const body = fs.readFileSync(abs);
        total += body.length;
        if (files.size >= MAX_FILES || total > MAX_TOTAL_BYTES) throw new Error(`the web root ${root} holds too many files or bytes`);
        const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
        files.set(url, { body, type, etag, immutable: url.startsWith('/assets/') });
      }
    }
  };
  if (fs.existsSync(path.join(root, 'index.html'))) walk(root, '');
  return files;
}

function send(request: FastifyRequest, reply: FastifyReply, file: WebFile): FastifyReply {
  reply
    .header('cache-control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
    .header('etag', file.etag)
    .header('referrer-policy', 'no-referrer');
  if (file.type.startsWith('text/html')) reply.header('content-security-policy', WEB_CSP).header('x-frame-options', 'DENY');
  const match = request.headers['if-none-match'];
  if (typeof match === 'string' && match.split(',').some((t) => t.trim().replace(/^W\//, '') === file.etag)) {
    return reply.code(304).send();
  }
  return reply.type(file.type).send(file.body);
}

function notBuilt(): never {
  throw new HttpProblem(404, 'NOT_FOUND', 'the web UI is not built: run `npm run build` (npm install does it)', { title: 'Not found' });
}

/**
 * Registers the UI's routes on `app`: `/` and the client routes (index.html), every file under
 * assets/ and every other top-level file of the build. Hidden from the OpenAPI document.
 */
export function registerWebApp(app: FastifyInstance, root: string): void {
  let files = new Map<string, WebFile>();
  try {
    files = loadWebFiles(root);
  } catch (e) {
    // A build being rewritten, or an unreadable file: the API serves on, the UI answers "not built".
    app.log.warn({ err: e }, 'the web UI could not be loaded; serving the API only');
  }
  const index = files.get('/index.html');
  const shell = (request: FastifyRequest, reply: FastifyReply) => (index ? send(request, reply, index) : notBuilt());
  const common = { schema: { hide: true }, config: { metricsRoute: '/' } } as const;
  app.get('/', common, async (request, reply) => shell(request, reply));
  for (const url of CLIENT_ROUTES) app.get(url, common, async (request, reply) => shell(request, reply));
  app.get('/assets/*', { schema: { hide: true }, config: { metricsRoute: '/assets/*' } }, async (request, reply) => {
    const file = files.get(pathOnly(request.url));
    if (!file?.immutable) throw new HttpProblem(404, 'NOT_FOUND', `no file ${pathOnly(request.url)}`);
    return send(request, reply, file);
  });
  for (const [url, file] of files) {
    if (url === '/index.html' || url.startsWith('/assets/') || url.indexOf('/', 1) >= 0) continue;
    if (app.hasRoute({ method: 'GET', url })) continue;
    app.get(url, { schema: { hide: true }, config: { metricsRoute: url } }, async (request, reply) => send(request, reply, file));
  }
}

function pathOnly(url: string): string {
  const q = url.indexOf('?');
  return q >= 0 ? url.slice(0, q) : url;
}
