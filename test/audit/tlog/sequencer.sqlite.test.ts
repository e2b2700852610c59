/** The wired transparency log on SQLite + the fs content store (sequencer-suite.ts). */
import { describe } from 'node:test';
import { attachAuditSinks } from '../../../src/runtime/sinks.ts';
import { initInstallation } from '../../../src/system/installation.ts';
import { embeddedContext } from '../../helpers/context.ts';
import { sequencerSuite } from './sequencer-suite.ts';

describe('transparency log sequencer (sqlite)', () => {
  sequencerSuite({
    name: 'sqlite',
    runs: 25,
    open: async () => {
      const ctx = await embeddedContext();
      await initInstallation(ctx);
      await attachAuditSinks(ctx);
      return { ctx, close: () => ctx.items.close() };
    },
  });
});
