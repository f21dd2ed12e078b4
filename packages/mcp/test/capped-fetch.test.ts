import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cappedFetch } from '../src/capped-fetch.ts';

let server: Server;
let url: string;

beforeAll(async () => {
  // Answers with as many bytes as the query asks for.
  server = createServer((req, res) => {
    const size = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('size'));
    res.writeHead(200, { 'content-type': 'application/json' }).end('x'.repeat(size));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('cappedFetch', () => {
  it("fails a request's answer once its body passes the limit", async () => {
    const capped = cappedFetch(1_000);
    expect(await (await capped(`${url}?size=1000`, { method: 'POST' })).text()).toHaveLength(1_000);
    await expect((await capped(`${url}?size=5000`, { method: 'POST' })).text()).rejects.toThrow("the server's answer is over 1000 bytes");
  });

  it('keeps status and headers, and leaves GET streams (notifications) uncounted', async () => {
    const response = await cappedFetch(10)(`${url}?size=50`, { method: 'GET' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.text()).toHaveLength(50);
  });
});
