import { embedded } from './harness.ts';
import { retentionSuite } from './suite.ts';

retentionSuite(embedded);
