import { Readable } from 'node:stream';
import { type FastifyReply, type FastifyRequest, errorCodes } from 'fastify';

/** How far the server reads an oversize body (keeping none of it) before it answers 413 and closes. */
export interface DrainBound {
  /** The largest whole body, declared or counted, that is read to its end; past it the server answers at once. */
  readonly maxBodyBytes: number;
  /** The longest the server reads past the limit before it answers anyway. */
  readonly drainMs: number;
}

/** Eight times the 1 MiB body limit, so a 5 MB mistake still gets its 413; five seconds, so a slow sender cannot hold a connection. */
export const DRAIN_DEFAULTS: DrainBound = Object.freeze({ maxBodyBytes: 8 * 1024 * 1024, drainMs: 5_000 });

/** Methods whose body Fastify never reads, so it never answers 413 for them. */
const BODYLESS = new Set(['GET', 'HEAD', 'TRACE']);

/**
 * A `preParsing` hook that lets a client read the 413 for a body over the route's `bodyLimit`.
 * Fastify answers such a body as soon as it knows (from Content-Length, or once the count passes
 * the limit) with `Connection: close`, and closes with the rest unread; the kernel then resets the
 * connection, and a client still sending (Python's http.client always, Node's fetch often) gets
 * EPIPE instead of the answer. This hook reads the rest and throws it away, up to `bound`, so the
 * answer comes after the body and the close is clean. Past the bound Fastify answers and closes as it did.
 */
export function drainOversizeBody(bound: DrainBound = DRAIN_DEFAULTS) {
  return async (request: FastifyRequest, reply: FastifyReply, payload: Readable): Promise<Readable> => {
    if (BODYLESS.has(request.method)) return payload;
    const limitBytes = request.routeOptions.bodyLimit;
    const declared = request.headers['content-length'];
    if (declared === undefined) return request.headers['transfer-encoding'] === undefined ? payload : capped(payload, limitBytes, bound);
    const declaredBytes = Number(declared);
    // Within the limit Fastify reads it; far past the bound it is not worth reading, and Fastify answers at once.
    if (!(declaredBytes > limitBytes) || declaredBytes > bound.maxBodyBytes) return payload;
    // Fastify would refuse it before reading a byte: read it here, then answer as Fastify does.
    await discard(payload, bound.maxBodyBytes, bound.drainMs);
    reply.header('connection', 'close');
    throw new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
  };
}

/**
 * A chunked body, passed on to the parser up to `limitBytes`; once it grows past that, the rest is
 * read and thrown away within the bound, and the stream then fails with Fastify's own 413 (its
 * parser adds `Connection: close`). Starts reading only when the parser does, so a body nobody
 * parses is left to Node as before.
 */
function capped(source: Readable, limitBytes: number, bound: DrainBound): Readable {
  let receivedBytes = 0;
  let started = false;
  const detach = () => source.off('data', onData).off('end', onEnd).off('error', onError);
  const onData = (chunk: Buffer) => {
    receivedBytes += chunk.length;
    if (receivedBytes <= limitBytes) {
      if (!out.push(chunk)) source.pause();
      return;
    }
    detach();
    void discard(source, bound.maxBodyBytes - receivedBytes, bound.drainMs).then(() => out.destroy(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE()));
  };
  const onEnd = () => out.push(null);
  const onError = (error: Error) => out.destroy(error);
  const out = new Readable({
    read() {
      if (started) {
        source.resume();
        return;
      }
      started = true;
      source.on('data', onData).once('end', onEnd).once('error', onError);
    },
    destroy(error, callback) {
      detach();
      callback(error);
    },
  });
  // The parser listens for errors while it reads; this keeps one that comes when it no longer does from crashing the process.
  out.on('error', () => undefined);
  return out;
}

/**
 * Reads `stream` to its end and keeps nothing. Resolves true at the end, false (leaving the stream
 * paused) once more than `budgetBytes` came, `deadlineMs` passed, or the stream broke off.
 */
function discard(stream: Readable, budgetBytes: number, deadlineMs: number): Promise<boolean> {
  if (stream.readableEnded) return Promise.resolve(true);
  if (budgetBytes < 0) return Promise.resolve(false);
  return new Promise((resolve) => {
    let leftBytes = budgetBytes;
    const settle = (drained: boolean) => {
      clearTimeout(timer);
      stream.off('data', onData).off('end', onEnd).off('error', onBreak).off('close', onBreak);
      if (!drained) stream.pause();
      resolve(drained);
    };
    const onData = (chunk: Buffer) => {
      leftBytes -= chunk.length;
      if (leftBytes < 0) settle(false);
    };
    const onEnd = () => settle(true);
    const onBreak = () => settle(false);
    const timer = setTimeout(onBreak, deadlineMs).unref();
    stream.on('data', onData).once('end', onEnd).once('error', onBreak).once('close', onBreak);
    stream.resume();
  });
}
