/**
 * Issue 15, deliverable 1: the installation-wide state (SYS#installation: installation record, epoch,
 * maintenance fence, restore hold, backup registry, content root, restore activation) is read and
 * written only through src/system/. Its key names come from core/keys.ts; no other module may import
 * them, so a service cannot build one of those keys behind the interface's back.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';

const SYSTEM_KEY_NAMES = [
  'SYS_PK',
  'INSTALLATION_SK',
  'FENCE_SK',
  'FENCE_SHARD_PK_PREFIX',
  'fenceShardKey',
  'EPOCH_SK',
  'EPOCH_RECORD_SK_PREFIX',
  'epochRecordSk',
  'RESTORE_HOLD_SK',
  'RESTORE_ACTIVATION_SK',
  'CONTENT_ROOT_SK',
  'BACKUP_SK_PREFIX',
  'backupSk',
];

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return /\.tsx?$/.test(e.name) ? [p] : [];
  });
}

/** The names a file imports from core/keys.ts. */
function keyImports(text: string): string[] {
  const names: string[] = [];
  for (const m of text.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*'[./]*core\/keys\.ts'/g)) {
    for (const part of (m[1] as string).split(',')) {
      const name = part
        .replace(/\btype\b/, '')
        .split(/\s+as\s+/)[0]
        ?.trim();
      if (name) names.push(name);
    }
  }
  return names;
}

describe('installation-wide state has one home (src/system/)', () => {
  it('no module outside src/system/ imports the SYS#installation key names', () => {
    const root = path.resolve(import.meta.dirname, '../../src');
    const offenders: string[] = [];
    for (const file of sourceFiles(root)) {
      const rel = path.relative(root, file);
      if (rel.startsWith(`system${path.sep}`) || rel === path.join('core', 'keys.ts')) continue;
      const used = keyImports(fs.readFileSync(file, 'utf8')).filter((n) => SYSTEM_KEY_NAMES.includes(n));
      if (used.length) offenders.push(`${rel}: ${used.join(', ')}`);
    }
    assert.deepEqual(offenders, [], 'ask src/system/ instead of building these keys');
  });

  it('the check sees an import it must refuse (the rule itself can fail)', () => {
    assert.deepEqual(keyImports("import { HEAD_SK, SYS_PK as P, type X } from '../core/keys.ts';"), ['HEAD_SK', 'SYS_PK', 'X']);
  });
});
