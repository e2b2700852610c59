/**
 * The key moves of installation schema 2 (docs/audit-format.md §2 "Moved entries"), for any run id,
 * output name and other key: ALP's mapping (core/keys.ts movedExecutionSk) and the independent
 * verifier's (scripts/verify-audit.py moved_sk) agree, map exactly the two schema-1 forms, and the
 * audit hash of a moved entry (SK = the new key, moved_from_sk = the old) is the hash it was written
 * with — in both implementations — while any other SK or moved_from_sk is hashed as stored.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { auditHash } from '../../src/audit/chain.ts';
import {
  executionFinishSk,
  executionOutputSk,
  legacyExecutionFinishSk,
  legacyExecutionOutputSk,
  movedExecutionSk,
} from '../../src/core/keys.ts';

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/verify-audit.py');
const part = fc.stringMatching(/^[0-9A-Za-z._-]{1,30}$/);
const anySk = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.tuple(part, part).map(([r, n]) => `EXEC#${r}#OUTPUT#${n}`),
  part.map((r) => `EXEC#${r}#FINISH`),
  part.map((r) => `EXEC#${r}`),
  fc.tuple(part, part).map(([r, n]) => `EXEC#${r}#OUTPUT#${n}#x`),
);

/** Runs the verifier's moved_sk and audit_hash over many cases in one python3 process. */
function python(cases: Array<{ sk: string; item: Record<string, unknown> }>): Array<{ moved: string | null; hash: string }> {
  const code = [
    'import importlib.util, json, sys',
    `s = importlib.util.spec_from_file_location('v', ${JSON.stringify(SCRIPT)})`,
    'v = importlib.util.module_from_spec(s); s.loader.exec_module(v)',
    'cases = json.load(sys.stdin)',
    'print(json.dumps([{"moved": v.moved_sk(c["sk"]), "hash": v.audit_hash(c["item"])} for c in cases]))',
  ].join('\n');
  const r = spawnSync('python3', ['-c', code], { input: JSON.stringify(cases), encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  assert.equal(r.stderr, '', r.stderr);
  return JSON.parse(r.stdout) as Array<{ moved: string | null; hash: string }>;
}

test('the schema-2 key moves: exactly the two old forms, the same in ALP and in the independent verifier', () => {
  fc.assert(
    fc.property(part, part, (run, name) => {
      assert.equal(movedExecutionSk(legacyExecutionOutputSk(run, name)), executionOutputSk(run, name));
      assert.equal(movedExecutionSk(legacyExecutionFinishSk(run)), executionFinishSk(run));
      assert.equal(movedExecutionSk(executionOutputSk(run, name)), undefined);
      assert.equal(movedExecutionSk(`EXEC#${run}`), undefined);
    }),
  );
  const sks = fc.sample(anySk, 300);
  const py = python(sks.map((sk) => ({ sk, item: {} })));
  for (const [i, sk] of sks.entries()) assert.equal(py[i]?.moved ?? undefined, movedExecutionSk(sk), sk);
});

test('a moved entry hashes as written, in both implementations; any other key or moved_from_sk is hashed as stored', () => {
  const cases: Array<{ sk: string; item: Record<string, unknown>; expected: string }> = [];
  fc.assert(
    fc.property(part, part, fc.boolean(), anySk, (run, name, finish, otherSk) => {
      const oldSk = finish ? legacyExecutionFinishSk(run) : legacyExecutionOutputSk(run, name);
      const written = { PK: `ART#${run}`, SK: oldSk, type: finish ? 'execution_finish' : 'execution_output', run_id: run, seq: 3 };
      const hash = auditHash(written);
      const moved = { ...written, SK: movedExecutionSk(oldSk) as string, moved_from_sk: oldSk, hash };
      assert.equal(auditHash(moved), hash);
      cases.push({ sk: oldSk, item: moved, expected: hash });
      if (otherSk !== moved.SK) {
        const elsewhere = { ...moved, SK: otherSk };
        assert.notEqual(auditHash(elsewhere), hash);
        cases.push({ sk: otherSk, item: elsewhere, expected: auditHash(elsewhere) });
      }
      if (otherSk !== oldSk) {
        const claimed = { ...moved, moved_from_sk: otherSk };
        assert.notEqual(auditHash(claimed), hash);
        cases.push({ sk: otherSk, item: claimed, expected: auditHash(claimed) });
      }
    }),
    { numRuns: 100 },
  );
  const py = python(cases);
  for (const [i, c] of cases.entries()) assert.equal(py[i]?.hash, c.expected, JSON.stringify(c.item));
});
