import type { ContentConfig } from '../core/config.ts';
import type { ContentStore } from './content-store.ts';

/** Opens the ContentStore engine a content URL names. Engines load lazily (the AWS SDK is large). */
export async function openContentStore(config: ContentConfig): Promise<ContentStore> {
  if (config.engine === 'fs') {
    const { FsContentStore } = await import('./fs/fs-content-store.ts');
    return FsContentStore.open(config.root);
  }
  const { S3ContentStore } = await import('./s3/s3-content-store.ts');
  return S3ContentStore.open(config);
}
