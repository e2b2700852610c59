/**
 * The web UI build: `vite build --config src/web/vite.config.ts` (part of `npm run build`) writes the
 * static files to dist/web, which `alp serve` serves at `/`. Preact's JSX is compiled by Vite's own
 * transformer (oxc); nothing is fetched at run time (no CDN), and the CSP of index.html allows only
 * this origin.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/',
  publicDir: 'public',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../../dist/web', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
