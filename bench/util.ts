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

/** One row of an issue's goals table: what was measured against which reference, PASS or MISS. */
export interface GoalRow {
  /** The workload as the goals table names it. */
  workload: string;
  /** The goal, e.g. '>= 1,000/s and >= 45 % of the disk's single-fsync rate'. */
  goal: string;
  /** The figure measured, with its unit and its ratio to the reference where there is one. */
  measured: string;
  /** The reference measured in the same run (empty when the goal is absolute). */
  reference: string;
  pass: boolean;
}

const goals: GoalRow[] = [];

/** Records a goal row; `npm run bench` prints every recorded row at the end (printGoals). */
export function goal(r: GoalRow): void {
  goals.push(r);
  row(`goal: ${r.workload}`, r.pass ? 'PASS' : 'MISS', `${r.measured} (goal ${r.goal}${r.reference ? `; reference ${r.reference}` : ''})`);
}

/** The goals table of the whole run, as Markdown, with the machine's load when it ended. */
export function printGoals(): void {
  if (goals.length === 0) return;
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
  console.log(`\n== goals (load average 1/5/15 min at the end: ${load}; ${os.cpus().length} cores)\n`);
  console.log('| workload | goal | measured | reference (same run) | verdict |');
  console.log('|---|---|---|---|---|');
  for (const g of goals) console.log(`| ${g.workload} | ${g.goal} | ${g.measured} | ${g.reference || '—'} | ${g.pass ? 'PASS' : 'MISS'} |`);
}

/** The middle value (the upper one of an even count); 0 for none. */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
