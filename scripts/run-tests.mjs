#!/usr/bin/env node
// Runs the node test runner over every test/**/*.test.ts (Node 20 does not discover .ts files itself).
// Usage: node scripts/run-tests.mjs [dir-or-file-filter...]; fails when no test file is found.
// Without a filter (`npm test`) the campaign-like files are left out (kill -9 during backup/restore, the
// fault matrix): the files package.json's `test:campaigns` names. `npm run test:campaigns` runs exactly
// those (.ci/run runs it after `npm test`), and a filter that names one runs it as before.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const exclude = new Set((process.env.ALP_TEST_EXCLUDE ?? 'test/e2e').split(',').filter(Boolean));
const campaignScript = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).scripts?.['test:campaigns'] ?? '';
const campaigns = new Set(campaignScript.split(/\s+/).filter((a) => a.startsWith('test/')));

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
for (const c of campaigns) {
  if (!c.endsWith('.test.ts') || !existsSync(path.join(root, c))) {
    console.error(`run-tests: package.json test:campaigns names ${c}, which is not a test file`);
    process.exit(1);
  }
}
if (filters.length > 0) files = files.filter((f) => filters.some((x) => f.includes(x)));
else files = files.filter((f) => !campaigns.has(f));
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
