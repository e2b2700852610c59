import { after } from 'node:test';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { distributed } from '../helpers/retention-harness.ts';
import { retentionSuite } from './suite.ts';

retentionSuite(distributed);
after(stopDistributedServers);
