/**
 * Lingering close, as web servers do it (RFC 9112 §9.6; nginx `lingering_close`). A response sent
 * before its request's body has fully arrived (a refusal, a 404, a GET that ignores a body) ends the
 * connection; closing a socket that still receives bytes makes the kernel answer with a reset, which
 * can erase the response from the client's buffer before the client has read it — the client sees a
 * dropped connection instead of the error. Such a connection instead half-closes after the response,
 * reads and discards what the client still sends, and closes when the client does, or after
 * LINGER_MS at the latest.
 */
import type { IncomingMessage } from 'node:http';

export const LINGER_MS = 2000;
const lingering = new WeakSet<IncomingMessage>();

export function lingerOnClose(request: IncomingMessage): void {
  const socket = request.socket;
  if (lingering.has(request) || !socket) return;
  lingering.add(request);
  // Node's HTTP server calls destroySoon() once the last response of a connection is written.
  socket.destroySoon = () => {
    if (socket.destroyed) return;
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    socket.once('close', () => clearTimeout(timer));
    socket.once('end', () => socket.destroy());
    socket.end();
    // Whatever still arrives is read and dropped (a handler that stopped reading the body paused it).
    request.removeAllListeners('data');
    request.unpipe();
    request.resume();
    socket.resume();
  };
}
