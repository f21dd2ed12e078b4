import { Agent, silentLogger } from '@arcflow/core';
import { type ArcflowWorker, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, scriptedProvider, testPrefix } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, spawnServe } from './harness.ts';

// Tenants on the HTTP API (SPEC §14): the enqueue body's tenant and priority, and a tenant over its
// runs_per_minute answered 429 with Retry-After, against a real `arcflow serve` process and a
// worker whose tenant_limits every process of the prefix reads from Redis.
const prefix = testPrefix('tenants-http');
let serve: ServeProcess;
let worker: ArcflowWorker;

beforeAll(async () => {
  worker = await startWorker({
    agents: [new Agent({ name: 'tenant_http', instructions: 'x' })],
    provider: scriptedProvider([]),
    redis: TEST_REDIS_URL,
    prefix,
    logger: silentLogger,
    tenant_limits: { metered: { runs_per_minute: 2 } },
  });
  serve = await spawnServe({ REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix });
}, 60_000);
afterAll(async () => {
  await Promise.all([serve?.stop(), worker?.close()]);
  await cleanupPrefix(prefix);
});

const enqueue = (body: object) => fetch(`${serve.url}/v1/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('tenants on the HTTP API', () => {
  it('refuses a tenant over its runs_per_minute with 429, Retry-After and tenant_rate_limited; other tenants go on', async () => {
    for (let i = 0; i < 2; i += 1) expect((await enqueue({ agent: 'tenant_http', input: 'x', tenant: 'metered' })).status).toBe(201);
    const refused = await enqueue({ agent: 'tenant_http', input: 'x', tenant: 'metered' });
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await refused.json()).toMatchObject({ status: 429, code: 'tenant_rate_limited', detail: expect.stringContaining("tenant 'metered'") });
    const other = await enqueue({ agent: 'tenant_http', input: 'x', tenant: 'other', priority: 2 });
    expect(other.status).toBe(201);
    const { run_id } = (await other.json()) as { run_id: string };
    expect(await (await fetch(`${serve.url}/v1/runs/${run_id}`)).json()).toMatchObject({ tenant: 'other', priority: 2 });
  });

  it('refuses a bad tenant or priority in the body with 400', async () => {
    expect((await enqueue({ agent: 'tenant_http', input: 'x', tenant: 'has space' })).status).toBe(400);
    expect((await enqueue({ agent: 'tenant_http', input: 'x', priority: 11 })).status).toBe(400);
    // A JSON body is taken as sent: a priority given as text is refused, not read as a number.
    const text = await enqueue({ agent: 'tenant_http', input: 'x', priority: '3' });
    expect(text.status).toBe(400);
    expect(await text.json()).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('priority') });
  });
});
