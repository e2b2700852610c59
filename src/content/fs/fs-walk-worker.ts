/**
 * The worker thread of FsContentStore.list (fs-walk.ts walkListing): walks one scope and posts its
 * batches, at most CREDITS ahead of what the listing's reader has taken (bounded memory).
 */
import { parentPort } from 'node:worker_threads';
import { CREDITS, packBatch, type WalkMessage, type WalkScope, walkObjects } from './fs-walk.ts';

const port = parentPort;
if (!port) throw new Error('fs-walk-worker runs as a worker thread');
let credits = CREDITS;
let wake: (() => void) | undefined;
let scope: WalkScope | undefined;
// The first message is the scope (the worker starts before the walk reaches it); the others are credits.
port.on('message', (m: { scope?: WalkScope; credit?: number }) => {
  if (m.scope) scope = m.scope;
  else credits++;
  wake?.();
});

const post = (m: WalkMessage) => port.postMessage(m, 'sizes' in m ? [m.sizes.buffer as ArrayBuffer] : []);
// Loaded: the calling thread hands the rest of its walk over now rather than after HAND_OVER_AT keys.
post({ ready: true });
try {
  while (!scope) await new Promise<void>((r) => (wake = r));
  for await (const batch of walkObjects(scope)) {
    while (credits === 0) await new Promise<void>((r) => (wake = r));
    credits--;
    post(packBatch(batch));
  }
  post({ done: true });
} catch (e) {
  const err = e as NodeJS.ErrnoException;
  post({ error: { message: err.message ?? String(e), ...(err.code ? { code: err.code } : {}) } });
}
port.close();
