/**
 * `alp start` (what `npm start` runs) in a child process on 127.0.0.1 with a free port, for tests that
 * need the server in its own process (memory sampling, signals). Resolves once it prints its status.
 */
import { type AlpProcessHandle, startAlpProcess } from '../helpers/alp-process.ts';

export type ServerProcess = AlpProcessHandle;

export function startServerProcess(data: string, args: string[] = [], env: Record<string, string> = {}): Promise<ServerProcess> {
  return startAlpProcess({ args: ['--data', data, ...args], env, timeoutMs: 30_000 });
}
