import { Agent, type ModelProvider, ProviderFailure, createToken, silentLogger } from '@arcflow/core';
import { type ArcflowWorker, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, reply, testPrefix } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, spawnServe } from './harness.ts';

// A run an end user's token enqueued for its tenant (SPEC §19, §14), forked, retried and bulk
// retried over HTTP with API keys (SPEC §15): the new runs are the same tenant's, at the same
// priority. Against a real `arcflow serve` process, Redis and a worker.
const prefix = testPrefix('fork-tenant-http');
const SECRET = 'fork-tenant-token-secret-0123456789-abcd';
const KEYS = { read: 'ft-read-secret-0123456789', write: 'ft-write-secret-0123456789', admin: 'ft-admin-secret-0123456789' };
const failing = { on: true };
let serve: ServeProcess;
let worker: ArcflowWorker;

/** Refuses every call while `failing.on` (the run fails), answers `ok` after. */
const model: ModelProvider = {
  id: 'switchable',
  defaultModel: 'switchable-model',
  async complete() {
    if (failing.on) throw new ProviderFailure('bad_request', 'refused', { retryable: false });
    return reply('ok');
  },
};

beforeAll(async () => {
  worker = await startWorker({ agents: [new Agent({ name: 'fork_http', instructions: 'x' })], provider: model, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
  serve = await spawnServe({
    REDIS_URL: TEST_REDIS_URL,
    ARCFLOW_PREFIX: prefix,
    ARCFLOW_TOKEN_SECRET: SECRET,
    ARCFLOW_API_KEYS: `viewer:${KEYS.read}:read,backend:${KEYS.write}:write,ops:${KEYS.admin}:admin`,
  });
}, 60_000);
afterAll(async () => {
  await Promise.all([serve?.stop(), worker?.close()]);
  await cleanupPrefix(prefix);
});

const call = async (method: string, path: string, bearer: string, body?: unknown) => {
  const response = await fetch(`${serve.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
};
const record = async (run_id: string) => (await call('GET', `/v1/runs/${run_id}`, KEYS.read)).body;
const until = async (run_id: string, status: string) => {
  for (let tries = 0; tries < 400; tries += 1) {
    const got = await record(run_id);
    if (got.status === status) return got;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`run ${run_id} did not reach ${status}`);
};

describe("fork, retry and bulk retry over HTTP keep a token's tenant", () => {
  it("a run a tenant's token enqueued is forked, retried and bulk retried into the same tenant, at its priority", async () => {
    const thread_id = `ft-thread-${prefix}`;
    const token = await createToken({ secret: SECRET, thread_id, actions: ['read', 'send'], agents: ['fork_http'], tenant: 'acme-http' });
    const sent = await call('POST', '/v1/runs', token, { agent: 'fork_http', input: 'go', priority: 2 });
    expect(sent.status).toBe(201);
    const source = sent.body.run_id as string;
    expect(await until(source, 'failed')).toMatchObject({ tenant: 'acme-http', priority: 2 });
    const other = (await call('POST', '/v1/runs', KEYS.write, { agent: 'fork_http', input: 'go', tenant: 'globex' })).body.run_id as string;
    const second = (await call('POST', '/v1/runs', KEYS.write, { agent: 'fork_http', input: 'go', tenant: 'acme-http' })).body.run_id as string;
    await until(other, 'failed');
    await until(second, 'failed');
    failing.on = false;

    // A token cannot fork (an operator's call); an API key can, and the fork is the tenant's.
    expect((await call('POST', `/v1/runs/${source}/fork`, token, { from: { iteration: 1 } })).status).toBe(403);
    const forked = await call('POST', `/v1/runs/${source}/fork`, KEYS.write, { from: { iteration: 1 } });
    expect(forked.status).toBe(201);
    expect(await until(forked.body.run_id, 'completed')).toMatchObject({ tenant: 'acme-http', priority: 2 });

    const retried = await call('POST', `/v1/runs/${source}/retry`, KEYS.write);
    expect(retried.status).toBe(201);
    expect(await until(retried.body.run_id, 'completed')).toMatchObject({ tenant: 'acme-http', priority: 2 });

    // The tenant's other failed run, not globex's.
    const bulk = await call('POST', '/v1/runs/bulk', KEYS.admin, { action: 'retry', filter: { status: 'failed', tenant: 'acme-http' } });
    expect(bulk).toEqual({ status: 200, body: { matched: 2, acted: 1, run_ids: [second] } });
    const secondRetry = (await record(second)).retried_by as string;
    expect(await until(secondRetry, 'completed')).toMatchObject({ tenant: 'acme-http' });
    expect((await record(secondRetry)).priority).toBeUndefined();
    expect((await record(other)).retried_by).toBeUndefined();
    // Listed by tenant: the token's run, its fork and retries, and the key's run for the same tenant.
    const listed = (await call('GET', '/v1/runs?tenant=acme-http&limit=50', KEYS.read)).body.runs.map((run: { run_id: string }) => run.run_id);
    expect(listed.sort()).toEqual([source, second, forked.body.run_id, retried.body.run_id, secondRetry].sort());
    expect((await call('GET', '/v1/runs?tenant=globex', KEYS.read)).body.runs.map((run: { run_id: string }) => run.run_id)).toEqual([other]);
    expect((await call('POST', '/v1/runs/bulk', KEYS.admin, { action: 'retry', filter: { status: 'failed', tenant: 'a b' } })).status).toBe(400);
  }, 60_000);
});
