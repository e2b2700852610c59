/**
 * The whole seed 004 retention suite (suite.ts) on DynamoDB Local + s3rver behind the GLACIER MODEL
 * proxy (test/helpers/s3-glacier-proxy.ts: cold GETs answer 403 InvalidObjectState, listings report each
 * object's own class, copies answer SHA-256 checksums, as real S3 does), so the retention protocol is
 * shown unchanged under S3's semantics. This is the suite's DynamoDB + S3 run (the model forwards
 * everything else to s3rver unchanged); the GLACIER-specific behaviour is retention-glacier.test.ts.
 */
import { after } from 'node:test';
import type { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { distributedServers, stopDistributedServers } from '../helpers/distributed.ts';
import { distributed, type Engine } from '../helpers/retention-harness.ts';
import { behindGlacierModel, type GlacierProxy, startGlacierProxy } from '../helpers/s3-glacier-proxy.ts';
import { retentionSuite } from './suite.ts';

let glacier: GlacierProxy | undefined;

const glacierEngine: Engine = {
  name: 'dynamodb + s3 behind the GLACIER model',
  open: async () => {
    const inst = await distributed.open();
    const { s3 } = await distributedServers();
    glacier ??= await startGlacierProxy(s3);
    const content = await behindGlacierModel(inst.ctx.content as S3ContentStore, s3, glacier);
    Object.assign(inst.ctx, { content });
    return inst;
  },
};

retentionSuite(glacierEngine);
after(async () => {
  await glacier?.stop();
  await stopDistributedServers();
});
