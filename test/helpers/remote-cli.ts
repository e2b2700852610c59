/**
 * A suite that runs the CLI (in this process) both with `--server` against a real `alp start` and
 * locally on the same installation, to compare the two: the server, its bootstrap tokens and the
 * helpers each such suite needs. Registers its own before/after hooks in the calling describe.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before } from 'node:test';
import { type ServerProcess, startServerProcess } from '../api/server-process.ts';
import { type Captured, captureCli, clearCliEnv, patchCliOutput } from './cli-inprocess.ts';
import { tempDir } from './tmp.ts';

type Json = Record<string, unknown>;

export function remoteAndLocalCli(prefix: string, defaultKind: 'agent' | 'human') {
  const dir = tempDir(prefix);
  const data = path.join(dir, 'd');
  let server: ServerProcess | undefined;
  let unpatch: (() => void) | undefined;
  let restoreEnv: () => void = () => {};
  const tokens = { human: '', agent: '', humanId: '' };
  const byDefault = () => tokens[defaultKind];

  before(async () => {
    restoreEnv = clearCliEnv();
    server = await startServerProcess(data);
    const human = server.status.tokens.find((t) => t.kind === 'human');
    tokens.human = human?.token as string;
    tokens.humanId = human?.principal as string;
    tokens.agent = server.status.tokens.find((t) => t.kind === 'agent')?.token as string;
    unpatch = patchCliOutput();
  });
  after(async () => {
    unpatch?.();
    await server?.stop();
    restoreEnv();
  });

  const url = () => (server as ServerProcess).url;
  // The global options first: a command's arguments may end with `-- CMD ARGS…` (exec run).
  const remote = (args: string[], token = byDefault()) => captureCli(['--server', url(), '--token', token, ...args]);
  const local = (args: string[], token = byDefault()) => captureCli(['--data', data, '--token', token, ...args]);
  const ok = async (run: Promise<Captured>, what: string): Promise<Captured> => {
    const r = await run;
    // An internal failure over HTTP is explained in the server's log only: show it with the failure.
    const log = () =>
      r.code === 1 && server
        ? server
            .stdout()
            .split('\n')
            .filter((l) => l.includes('"level":50'))
            .join('\n')
        : '';
    assert.equal(r.code, 0, `${what}: exit ${r.code}: ${r.stderr}${log()}`);
    return r;
  };
  const rjson = async (args: string[], token = byDefault()): Promise<Json> =>
    JSON.parse((await ok(remote([...args, '--json'], token), args.join(' '))).stdout) as Json;
  const ljson = async (args: string[], token = byDefault()): Promise<Json> =>
    JSON.parse((await ok(local([...args, '--json'], token), args.join(' '))).stdout) as Json;
  /** The command over HTTP and on the installation: one JSON document. */
  const same = async (args: string[], token = byDefault()): Promise<Json> => {
    const over = await rjson(args, token);
    assert.deepEqual(over, await ljson(args, token), `alp ${args.join(' ')}: remote and local differ`);
    return over;
  };
  /** The same, without --json: one text. */
  const sameText = async (args: string[], token = byDefault()): Promise<string> => {
    const over = (await ok(remote(args, token), args.join(' '))).stdout;
    assert.equal(over, (await ok(local(args, token), args.join(' '))).stdout, `alp ${args.join(' ')}: remote and local text differ`);
    return over;
  };
  const file = (name: string, text: string) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, text);
    return p;
  };
  return { dir, data, tokens, server: () => server as ServerProcess, remote, local, ok, rjson, ljson, same, sameText, file };
}
