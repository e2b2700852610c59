/**
 * One HTTP POST of a signed message, bounded by a timeout from connect to the end of the answer.
 * Delivered means a 2xx answer; a redirect is not followed (the endpoint is the URL a human
 * registered) and counts as a failure, as does any other status, a timeout or a network error.
 */
import { performance } from 'node:perf_hooks';

export interface SendOutcome {
  delivered: boolean;
  status?: number;
  error?: string;
  durationMs: number;
}

/** Bytes of an answer read before it is dropped: enough to keep a connection reusable, never a large body. */
const MAX_ANSWER_BYTES = 64 * 1024;

async function drain(res: Response): Promise<void> {
  const reader = res.body?.getReader();
  if (!reader) return;
  let read = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    read += value.byteLength;
    if (read > MAX_ANSWER_BYTES) {
      await reader.cancel();
      return;
    }
  }
}

function errorText(e: unknown, timeoutMs: number): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return `timeout after ${timeoutMs} ms`;
  return err.cause?.code ?? err.cause?.message ?? err.message ?? String(e);
}

export async function postSigned(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<SendOutcome> {
  const started = performance.now();
  const took = () => Math.round(performance.now() - started);
  try {
    const res = await fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    await drain(res);
    const delivered = res.status >= 200 && res.status < 300;
    return { delivered, status: res.status, durationMs: took() };
  } catch (e) {
    return { delivered: false, error: errorText(e, timeoutMs).slice(0, 200), durationMs: took() };
  }
}
