/** The wired transparency log on DynamoDB Local + s3rver (sequencer-suite.ts), with a file key as ALP_SIGNING_KEY would name. */
import path from 'node:path';
import { after, describe } from 'node:test';
import { attachAuditSinks } from '../../../src/runtime/sinks.ts';
import { initInstallation } from '../../../src/system/installation.ts';
import { fileKeySource } from '../../../src/system/installation-key.ts';
import { distributedInstallation, stopDistributedServers } from '../../helpers/distributed.ts';
import { tempDir } from '../../helpers/tmp.ts';
import { sequencerSuite } from './sequencer-suite.ts';

after(stopDistributedServers);

describe('transparency log sequencer (dynamodb + s3)', () => {
  sequencerSuite({
    name: 'dynamodb',
    runs: 6,
    open: async () => {
      const inst = await distributedInstallation();
      const ctx = Object.assign(inst.ctx, { signingKey: fileKeySource(path.join(tempDir('alp-tlog-key'), 'k.pem'), { create: true }) });
      await initInstallation(ctx);
      await attachAuditSinks(ctx);
      return { ctx, close: () => inst.close() };
    },
  });
});
