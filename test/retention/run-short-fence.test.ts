/**
 * The short-fence suite (run-short-fence-suite.ts) on SQLite + directory and on DynamoDB Local + s3rver.
 */
import { after } from 'node:test';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { distributed, embedded } from '../helpers/retention-harness.ts';
import { shortFenceSuite } from './run-short-fence-suite.ts';

shortFenceSuite(embedded);
shortFenceSuite(distributed);
after(stopDistributedServers);
