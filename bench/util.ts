import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function benchDir(label: string): string {
  const base = process.env.ALP_BENCH_DIR ?? os.tmpdir();
  return fs.mkdtempSync(path.join(base, `alp-bench-${label}-`));
}

export function mbps(bytes: number, ms: number): number {
  return bytes / (1024 * 1024) / (ms / 1000);
}

export function fmt(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = process.hrtime.bigint();
  const value = await fn();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, value };
}

export function row(label: string, value: string, note = ''): void {
  console.log(`  ${label.padEnd(52)} ${value.padStart(16)}  ${note}`);
}

export function header(title: string): void {
  console.log(`\n== ${title}`);
}
