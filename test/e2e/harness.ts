/**
 * End-to-end harness: `alp start` as `npm start` runs it (dist/cli/main.js, serving the built UI from
 * dist/web) in a child process on 127.0.0.1 with a fresh embedded installation, and Debian's Chromium
 * driven by playwright-core. Never a browser download: a missing /usr/bin/chromium fails the run with
 * the command that installs it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { ALP_BUILT, startAlpProcess } from '../helpers/alp-process.ts';

export const root = path.resolve(import.meta.dirname, '../..');
export const CHROMIUM = process.env.ALP_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];
export const SCREENSHOTS = path.join(root, 'test-results', 'screenshots');

export interface AlpProcess {
  url: string;
  human: { principal: string; token: string };
  agent: { principal: string; token: string };
  /** Everything the server printed but its status line (which shows the new tokens once). */
  logs(): string;
  stop(): Promise<void>;
}

/** Starts the built `alp start` on a new installation in `data`; resolves once it serves. */
export async function startAlp(data: string): Promise<AlpProcess> {
  for (const f of [ALP_BUILT[0] as string, path.join(root, 'dist/web/index.html')]) {
    if (!fs.existsSync(f)) throw new Error(`${path.relative(root, f)} is missing: run \`npm run build\` first (npm install does it)`);
  }
  const alp = await startAlpProcess({ alp: ALP_BUILT, args: ['--data', data, '--log-level', 'info'], timeoutMs: 30_000 });
  const pick = (kind: string) => {
    const t = alp.status.tokens.find((x) => x.kind === kind);
    if (!t) throw new Error(`alp start printed no ${kind} token`);
    return { principal: t.principal, token: t.token };
  };
  return {
    url: alp.url,
    human: pick('human'),
    agent: pick('agent'),
    logs: () => alp.stdout().replace(alp.statusLine, '') + alp.stderr(),
    async stop() {
      await alp.stop();
    },
  };
}

/** Debian's Chromium, headless; fails (never skips) when it is not installed. */
export async function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: the e2e tests drive Debian's Chromium. Install it with \`apt-get update && apt-get install -y chromium\` (.ci/run does); never a browser download.`,
    );
  }
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true, timeout: 60_000 });
}

// Browser globals, used only inside page.evaluate callbacks (these files compile without the DOM library).
declare const window: Record<string, unknown>;
declare const document: unknown;

const AXE_SOURCE = () => fs.readFileSync(path.join(root, 'node_modules/axe-core/axe.min.js'), 'utf8');
let axeSource: string | undefined;

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[]; failureSummary?: string }>;
}

/**
 * Runs axe-core in the page (evaluated over the DevTools protocol, so the page's CSP stays on) and
 * returns the violations.
 */
export async function axe(page: Page): Promise<AxeViolation[]> {
  axeSource ??= AXE_SOURCE();
  const present = await page.evaluate(() => typeof window.axe !== 'undefined');
  if (!present) await page.evaluate(axeSource);
  return page.evaluate(async () => {
    const w = window as unknown as {
      axe: { run(ctx: unknown, opts: unknown): Promise<{ violations: AxeViolation[] }> };
    };
    const r = await w.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => ({ target: n.target, failureSummary: n.failureSummary ?? '' })),
    }));
  });
}

export function serious(violations: AxeViolation[]): AxeViolation[] {
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
