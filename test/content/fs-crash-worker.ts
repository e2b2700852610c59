/**
 * A child process for test/content/fs-publish.test.ts: stages an object and its metadata.json into new
 * directories, as a creation does, and publishes both; SIGKILLs itself at the `killAt`-th fsync the
 * store issues (0-based; never when negative), before that fsync runs. Prints the order of the fsyncs
 * it saw, then DONE when the publish returned.
 * argv: root id killAt [fresh] — with `fresh`, both keys are staged as fresh (written in place).
 */
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';

const [root, id, killAtText, mode] = process.argv.slice(2) as [string, string, string, string | undefined];
const opts = mode === 'fresh' ? { fresh: true } : {};
const killAt = Number(killAtText);
let seen = 0;
const store = await FsContentStore.open(root, {
  fsyncHook: ({ kind, path }) => {
    process.stdout.write(`${kind} ${path}\n`);
    if (seen++ === killAt) process.kill(process.pid, 'SIGKILL');
  },
});
const content = await store.stage(`artifacts/${id}/v1/f.txt`, [Buffer.alloc(4096, 7)], opts);
const meta = await store.stage(`artifacts/${id}/v1/metadata.json`, [Buffer.from('{"m":1}\n')], opts);
await store.publish([content, meta]);
process.stdout.write('DONE\n');
