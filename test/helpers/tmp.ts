import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const created: string[] = [];
process.on('exit', () => {
  for (const dir of created) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh temp directory, removed when the test process exits. */
export function tempDir(label = 'alp'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${label}-`));
  created.push(dir);
  return dir;
}

export async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

export async function* bytesOf(...parts: Array<string | Uint8Array>): AsyncIterable<Uint8Array> {
  for (const p of parts) yield typeof p === 'string' ? Buffer.from(p) : p;
}
