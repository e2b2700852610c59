import type { ContentConfig } from '../../core/config.ts';
import { InternalError } from '../../core/errors.ts';
import type { ContentStore } from '../content-store.ts';

// Placeholder until the S3 engine lands (issue 5).
export const S3ContentStore = {
  async open(_config: Extract<ContentConfig, { engine: 's3' }>): Promise<ContentStore> {
    throw new InternalError('the S3 engine is not built yet');
  },
};
