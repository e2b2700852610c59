import { after } from 'node:test';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { distributed } from './harness.ts';
import { retentionSuite } from './suite.ts';

retentionSuite(distributed);
after(stopDistributedServers);
