import type { Command } from 'commander';
import { output, withRuntime } from '../runtime.ts';
import { initAndDescribe } from './admin.ts';

export function registerStartCommand(program: Command): void {
  program
    .command('start')
    .description('what `npm start` runs: open (or create) the installation and print its status')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const status = await initAndDescribe(rt);
        output(rt.opts, status, () => [
          `ALP installation ${status.installation_id} (${status.created ? 'created' : 'opened'})`,
          `  metadata: ${status.metadata}`,
          `  content:  ${status.content}`,
        ]);
      }),
    );
}
