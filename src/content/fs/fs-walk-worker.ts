/**
 * The worker thread of FsContentStore.list (fs-walk.ts walkInWorker): walks one scope and posts its
 * batches, at most CREDITS ahead of what the listing's reader has taken (bounded memory).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { CREDITS, type WalkMessage, type WalkScope, walkObjects } from './fs-walk.ts';

const port = parentPort;
if (!port) throw new Error('fs-walk-worker runs as a worker thread');
let credits = CREDITS;
let wake: (() => void) | undefined;
port.on('message', () => {
  credits++;
  wake?.();
});

const post = (m: WalkMessage) => port.postMessage(m);
try {
  for await (const batch of walkObjects(workerData as WalkScope)) {
    while (credits === 0) await new Promise<void>((r) => (wake = r));
    credits--;
    post({ batch });
  }
  post({ done: true });
} catch (e) {
  const err = e as NodeJS.ErrnoException;
  post({ error: { message: err.message ?? String(e), ...(err.code ? { code: err.code } : {}) } });
}
port.close();
