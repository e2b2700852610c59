#!/usr/bin/env node
// Runs the node test runner over every test/**/*.test.ts (Node 20 does not discover .ts files itself).
// Usage: node scripts/run-tests.mjs [dir-or-file-filter...]; fails when no test file is found.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const exclude = new Set((process.env.ALP_TEST_EXCLUDE ?? 'test/e2e').split(',').filter(Boolean));

function find(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = path.join(dir, name);
    const rel = path.relative(root, p);
    if (exclude.has(rel)) continue;
    if (statSync(p).isDirectory()) out.push(...find(p));
    else if (name.endsWith('.test.ts')) out.push(rel);
  }
  return out;
}

const filters = process.argv.slice(2);
let files = find(path.join(root, 'test'));
if (filters.length > 0) files = files.filter((f) => filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('run-tests: no test files found');
  process.exit(1);
}
const concurrency = process.env.ALP_TEST_CONCURRENCY ?? '2';
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000', ...files],
  { cwd: root, stdio: 'inherit', env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' } },
);
process.exit(result.status ?? 1);
