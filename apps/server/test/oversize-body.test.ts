import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, spawnServe } from './harness.ts';

const run = promisify(execFile);
const prefix = testPrefix('oversize');
const KEY = 'write-secret-0123456789';
const TRIES = 20;
/** Five times the server's 1 MiB limit, within what it drains before answering. */
const OVERSIZE_BYTES = 5 * 1024 * 1024;
const oversizeBody = () => `{"agent":"api_agent","input":"${'x'.repeat(OVERSIZE_BYTES)}"}`;
const HEADERS = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
let serve: ServeProcess;

beforeAll(async () => {
  serve = await spawnServe({ REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, ARCFLOW_API_KEYS: `backend:${KEY}:write`, ARCFLOW_API_RATE: '1000' });
});
afterAll(async () => {
  await serve?.stop();
  await cleanupPrefix(prefix);
});

/** What one try saw: the answer's status, content type and body, or the client's error. */
interface Outcome {
  status?: number;
  type?: string | null;
  body?: Record<string, unknown>;
  error?: string;
}

const PAYLOAD_TOO_LARGE = { status: 413, type: expect.stringMatching(/^application\/problem\+json/), body: { status: 413, code: 'payload_too_large' } };
const answered413 = (outcomes: Outcome[]) => outcomes.filter((outcome) => outcome.status === 413 && outcome.body?.code === 'payload_too_large').length;

async function fetchOnce(body: string): Promise<Outcome> {
  try {
    const response = await fetch(`${serve.url}/v1/runs`, { method: 'POST', headers: HEADERS, body });
    return { status: response.status, type: response.headers.get('content-type'), body: (await response.json()) as Record<string, unknown> };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return { error: cause?.code ?? String(error) };
  }
}

/** Python's http.client sends the whole body before it reads the answer: the client the issue was filed with. */
const PYTHON_CLIENT = `
import http.client, json, sys
from urllib.parse import urlsplit
url, key, tries, size = urlsplit(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
body = b'{"agent":"api_agent","input":"' + b'x' * size + b'"}'
outcomes = []
for _ in range(tries):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=15)
    try:
        conn.request('POST', '/v1/runs', body=body, headers={'authorization': 'Bearer ' + key, 'content-type': 'application/json'})
        response = conn.getresponse()
        outcomes.append({'status': response.status, 'type': response.getheader('content-type'), 'body': json.loads(response.read())})
    except Exception as error:
        outcomes.append({'error': type(error).__name__})
    finally:
        conn.close()
print(json.dumps(outcomes))
`;

/** What a node:http request saw: the answer, if one came, and whether the whole body went out first. */
interface RawOutcome extends Outcome {
  /** The request's last byte was handed to the socket with no error. */
  sent: boolean;
  /** …and that before the answer came: what a client that reads only after it wrote (Python's) needs. */
  sentBeforeAnswer: boolean;
  elapsedMs: number;
}

/**
 * One request through node:http writing `totalBytes` in 64 KiB pieces, `paceMs` apart (chunked unless
 * `contentLength` is given, pausing for good after `stallAfterBytes`); resolves once the connection closed.
 */
function sendRaw(options: { totalBytes: number; contentLength?: number; stallAfterBytes?: number; paceMs?: number }): Promise<RawOutcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    const outcome: RawOutcome = { sent: false, sentBeforeAnswer: false, elapsedMs: 0 };
    let answered: Promise<void> = Promise.resolve();
    const headers: Record<string, string | number> = { ...HEADERS, ...(options.contentLength === undefined ? {} : { 'content-length': options.contentLength }) };
    const req = request(new URL('/v1/runs', serve.url), { method: 'POST', headers, agent: false }, (response) => {
      outcome.sentBeforeAnswer = outcome.sent;
      answered = new Promise((done) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          text += chunk;
        });
        response.on('end', () => {
          Object.assign(outcome, { status: response.statusCode, type: response.headers['content-type'] ?? null, body: JSON.parse(text) as Record<string, unknown> });
          done();
        });
        response.on('close', done);
      });
    });
    req.on('finish', () => {
      outcome.sent = true;
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      outcome.error ??= error.code ?? error.message;
    });
    req.on('close', () => {
      void answered.then(() => resolve({ ...outcome, elapsedMs: Date.now() - started }));
    });
    const piece = Buffer.alloc(64 * 1024, 'x');
    const stopAt = options.stallAfterBytes ?? options.totalBytes;
    const write = async () => {
      for (let written = 0; !req.destroyed && written < stopAt; ) {
        const size = Math.min(piece.length, stopAt - written);
        written += size;
        if (!req.write(piece.subarray(0, size))) await once(req, 'drain');
        if (options.paceMs !== undefined) await sleep(options.paceMs);
      }
      if (!req.destroyed && options.stallAfterBytes === undefined) req.end();
    };
    void write().catch(() => undefined); // a write refused: req's own 'error' records why
    // A stalled client never ends its request: should the server wait on it, the test gives up after 20 s.
    if (options.stallAfterBytes !== undefined) setTimeout(() => req.destroy(), 20_000).unref();
  });
}

describe('arcflow serve: an oversize request body gets its 413 problem document, whatever the client', () => {
  it(`answers ${TRIES} of ${TRIES} Node fetch requests with a 5 MiB body with 413 payload_too_large`, async () => {
    const body = oversizeBody();
    const outcomes: Outcome[] = [];
    for (let attempt = 0; attempt < TRIES; attempt += 1) outcomes.push(await fetchOnce(body));
    expect(answered413(outcomes), JSON.stringify(outcomes.filter((outcome) => outcome.status !== 413))).toBe(TRIES);
    expect(outcomes[0]).toMatchObject(PAYLOAD_TOO_LARGE);
  });

  it(`answers ${TRIES} of ${TRIES} Python http.client requests with a 5 MiB body with 413 payload_too_large`, async () => {
    const { stdout } = await run('python3', ['-c', PYTHON_CLIENT, serve.url, KEY, String(TRIES), String(OVERSIZE_BYTES)], { maxBuffer: 1024 * 1024 });
    const outcomes = JSON.parse(stdout) as Outcome[];
    expect(answered413(outcomes), JSON.stringify(outcomes.filter((outcome) => outcome.status !== 413))).toBe(TRIES);
    expect(outcomes[0]).toMatchObject(PAYLOAD_TOO_LARGE);
  });

  it('answers a chunked body that grows past the limit (no Content-Length) with 413 payload_too_large', async () => {
    // A body produced as it goes (a piece a millisecond), as chunked bodies are. node:http reads an early answer while it
    // writes, so the answer alone proves little: the whole body must go out before it, as Python's client needs.
    const chunked = await sendRaw({ totalBytes: OVERSIZE_BYTES, paceMs: 1 });
    expect(chunked, JSON.stringify({ ...chunked, body: undefined })).toMatchObject({ ...PAYLOAD_TOO_LARGE, sent: true, sentBeforeAnswer: true });
    expect(chunked.error).toBeUndefined();
  });

  it('does not hold a connection for a body far past the drain bound: a 50 MB Content-Length is answered or closed at once', async () => {
    const outcome = await sendRaw({ totalBytes: 50_000_000, contentLength: 50_000_000 });
    expect(outcome.elapsedMs).toBeLessThan(3_000);
    if (outcome.status !== undefined) expect(outcome).toMatchObject(PAYLOAD_TOO_LARGE);
    else expect(outcome.error).toMatch(/^(EPIPE|ECONNRESET)$/);
  });

  it('does not wait for ever on a client that stalls mid-body: it answers 413 once the drain time (5 s) is up', async () => {
    const outcome = await sendRaw({ totalBytes: OVERSIZE_BYTES, contentLength: OVERSIZE_BYTES, stallAfterBytes: 2 * 1024 * 1024 });
    expect(outcome).toMatchObject(PAYLOAD_TOO_LARGE);
    expect(outcome.elapsedMs).toBeLessThan(10_000);
  });

  it('still parses a normal request on the same server afterwards', async () => {
    const response = await fetch(`${serve.url}/v1/runs`, { method: 'POST', headers: HEADERS, body: JSON.stringify({ agent: 'no_such_agent', input: 'hello' }) });
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ code: 'unknown_agent' });
  });
});
