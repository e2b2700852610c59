/**
 * The worker thread of hash-pool.ts, as the source it is started from (`eval`): sha256 of chunks the
 * calling thread put into SharedArrayBuffer slots, one running hash per session, each chunk
 * acknowledged so the caller can reuse its slot. Plain JavaScript on purpose: no module to resolve, no
 * loader to register (run from source, a worker would first boot tsx: ~1 s of a CLI command), the
 * same in dist/, in a bundle and under tsx. The messages are HashRequest and HashReply (hash-pool.ts).
 */
export const HASH_WORKER_SOURCE = `
const { createHash } = require('node:crypto');
const { parentPort } = require('node:worker_threads');
const sessions = new Map();
parentPort.on('message', (m) => {
  if ('open' in m) {
    sessions.set(m.session, { hash: createHash('sha256'), memory: m.open });
    return;
  }
  const s = sessions.get(m.session);
  if (!s) return;
  if ('slot' in m) {
    s.hash.update(new Uint8Array(s.memory, m.offset, m.length));
    parentPort.postMessage({ session: m.session, slot: m.slot });
  } else if ('finish' in m) {
    parentPort.postMessage({ session: m.session, digest: s.hash.digest('hex') });
  } else {
    sessions.delete(m.session);
  }
});
`;
