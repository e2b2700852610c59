import { embedded } from '../helpers/retention-harness.ts';
import { retentionSuite } from './suite.ts';

retentionSuite(embedded);
