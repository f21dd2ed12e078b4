import { get as httpGet } from 'node:http';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createToken } from '@arcflow/core';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { ARCFLOW_BIN, type WorkerProcess, spawnWorker } from '@arcflow/worker';
import SwaggerParser from '@apidevtools/swagger-parser';
import { SignJWT, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, readSse, spawnServe } from './harness.ts';

// End users' tokens (SPEC §19) against real `arcflow serve` processes, Redis and a worker: one
// server holding the new and the old secret (rotating), one holding the new one only (the old
// removed), and one holding none.
const run = promisify(execFile);
const FIXTURE = new URL('./fixtures/api-agents.ts', import.meta.url).pathname;
const prefix = testPrefix('tokens');
const NEW = 'new-token-secret-0123456789-abcdefghij';
const OLD = 'old-token-secret-0123456789-abcdefghij';
const KEYS = { read: 'tok-read-secret-0123456789', write: 'tok-write-secret-0123456789', admin: 'tok-admin-secret-0123456789' };
const env = {
  REDIS_URL: TEST_REDIS_URL,
  ARCFLOW_PREFIX: prefix,
  ARCFLOW_API_KEYS: `viewer:${KEYS.read}:read,backend:${KEYS.write}:write,ops:${KEYS.admin}:admin`,
  ARCFLOW_API_RATE: '1000',
  ARCFLOW_SSE_HEARTBEAT_MS: '200',
};
let rotating: ServeProcess;
let rotated: ServeProcess;
let disabled: ServeProcess;
let worker: WorkerProcess;

beforeAll(async () => {
  [rotating, rotated, disabled, worker] = await Promise.all([
    spawnServe({ ...env, ARCFLOW_TOKEN_SECRET: `${NEW},${OLD}` }),
    spawnServe({ ...env, ARCFLOW_TOKEN_SECRET: NEW }),
    spawnServe(env),
    spawnWorker(FIXTURE, { env: { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix } }),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([rotating?.stop(), rotated?.stop(), disabled?.stop(), worker?.stop()]);
  await cleanupPrefix(prefix);
});

type Credential = { key: keyof typeof KEYS } | { token: string } | { query: string };
const call = (path: string, credential: Credential, init: RequestInit = {}, serve = rotating) => {
  const url = 'query' in credential ? `${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(credential.query)}` : path;
  const authorization = 'key' in credential ? KEYS[credential.key] : 'token' in credential ? credential.token : undefined;
  return fetch(`${serve.url}${url}`, {
    ...init,
    headers: {
      ...(authorization ? { authorization: `Bearer ${authorization}` } : {}),
      ...(init.body ? { 'content-type': 'application/json' } : {}),
      ...(init.headers as Record<string, string>),
    },
  });
};
const json = async (response: Response) => ({ status: response.status, body: (await response.json()) as Record<string, any> });
const post = (path: string, credential: Credential, body: unknown, serve = rotating) => call(path, credential, { method: 'POST', body: JSON.stringify(body) }, serve).then(json);
const get = (path: string, credential: Credential, serve = rotating) => call(path, credential, {}, serve).then(json);
const enqueueWithKey = async (body: Record<string, unknown>) => (await post('/v1/runs', { key: 'write' }, body)).body.run_id as string;
const until = async (run_id: string, statuses: string[]) => {
  let record: Record<string, any> = {};
  for (let tries = 0; tries < 300 && !statuses.includes(record.status); tries += 1) {
    record = (await get(`/v1/runs/${run_id}`, { key: 'read' })).body;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return record;
};
const forbidden = { status: 403, body: { status: 403, code: 'forbidden' } };
const thread = (name: string) => `${name}-${prefix}`;

describe("end users' tokens on arcflow serve (SPEC §19)", () => {
  it("passes every route a thread token's actions name on its thread and its runs, and records whose runs it enqueued", async () => {
    const mine = thread('mine');
    const token = await createToken({ secret: NEW, thread_id: mine, actions: ['read', 'send'], agents: ['api_agent'], subject: 'user-7' });
    const bearer = { token };
    // send: on the token's thread without naming it, and naming it.
    const created = await post('/v1/runs', bearer, { agent: 'api_agent', input: 'wait=1 hello', stream: true });
    expect(created.status).toBe(201);
    const run_id = created.body.run_id as string;
    expect((await post('/v1/runs', bearer, { agent: 'api_agent', input: 'wait=1 again', thread_id: mine })).status).toBe(201);
    const record = await until(run_id, ['completed']);
    expect(record).toMatchObject({ status: 'completed', thread_id: mine, enqueued_by: 'token:user-7' });
    // read: the record, its events (JSON, and SSE with ?token=), its stream (?token=), its messages, its thread.
    expect(await get(`/v1/runs/${run_id}`, bearer)).toMatchObject({ status: 200, body: { run_id, enqueued_by: 'token:user-7' } });
    const events = await get(`/v1/runs/${run_id}/events`, bearer);
    expect(events.body.at(-1)).toMatchObject({ kind: 'RunCompleted' });
    const sse = await call(`/v1/runs/${run_id}/events`, { query: token }, { headers: { accept: 'text/event-stream' } });
    expect(sse.headers.get('referrer-policy')).toBe('no-referrer');
    expect((await readSse(sse)).messages.at(-1)).toMatchObject({ event: 'RunCompleted' });
    const stream = await call(`/v1/runs/${run_id}/stream`, { query: token });
    expect(stream.status).toBe(200);
    expect((await readSse(stream)).messages.at(-1)).toMatchObject({ event: 'end' });
    expect((await get(`/v1/runs/${run_id}/messages`, bearer)).body.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'done: wait=1 hello' });
    const ownThread = await get(`/v1/threads/${mine}`, bearer);
    expect(ownThread.status).toBe(200);
    expect(ownThread.body.runs.map((each: { run_id: string }) => each.run_id)).toContain(run_id);
    // cancel its run; respond to its run's approval (each on a thread of its own: the fixture's model reads the thread's first message).
    const actions = ['read', 'send', 'cancel', 'respond'] as const;
    const canceller = { token: await createToken({ secret: NEW, thread_id: thread('cancel'), actions: [...actions], agents: ['api_agent'] }) };
    const long = (await post('/v1/runs', canceller, { agent: 'api_agent', input: 'wait=5000 long' })).body.run_id as string;
    await until(long, ['running']);
    expect(await post(`/v1/runs/${long}/cancel`, canceller, {})).toMatchObject({ status: 200, body: { cancelled: true } });
    const responder = { token: await createToken({ secret: NEW, thread_id: thread('respond'), actions: [...actions], agents: ['api_approver'], subject: 'user-7' }) };
    const waiting = (await post('/v1/runs', responder, { agent: 'api_approver', input: 'refund o-7' })).body.run_id as string;
    expect((await until(waiting, ['waiting'])).pending_approvals).toHaveLength(1);
    // An answer given with a token is the token's: it cannot name someone else.
    expect(await post(`/v1/runs/${waiting}/approvals/c_refund`, responder, { approved: true, by: 'admin' })).toMatchObject(forbidden);
    expect(await post(`/v1/runs/${waiting}/approvals/c_refund`, responder, { approved: true })).toMatchObject({ status: 200, body: { approved: true, by: 'token:user-7' } });
    expect(await until(waiting, ['completed'])).toMatchObject({ output: 'refunded o-7', enqueued_by: 'token:user-7' });
    // A token without a subject still says a token enqueued the run.
    const anonymous = await createToken({ secret: NEW, thread_id: mine, actions: ['send'], agents: ['api_agent'] });
    const plain = (await post('/v1/runs', { token: anonymous }, { agent: 'api_agent', input: 'wait=1 anon' })).body.run_id as string;
    expect((await get(`/v1/runs/${plain}`, { key: 'read' })).body.enqueued_by).toBe('token');
  });

  it('answers 403 forbidden for another thread, another run, an unknown run, an action or agent it does not name, and every route it has no rule for', async () => {
    const mine = thread('own');
    const theirs = await enqueueWithKey({ agent: 'api_agent', input: 'wait=1 theirs', thread_id: thread('theirs') });
    const loose = await enqueueWithKey({ agent: 'api_agent', input: 'wait=1 on no thread' });
    const token = await createToken({ secret: NEW, thread_id: mine, actions: ['read', 'send', 'cancel', 'respond'], agents: ['api_agent'] });
    const bearer = { token };
    for (const run_id of [theirs, loose, 'run_not_there']) {
      for (const path of [`/v1/runs/${run_id}`, `/v1/runs/${run_id}/events`, `/v1/runs/${run_id}/stream`, `/v1/runs/${run_id}/messages`]) {
        expect(await get(path, bearer), path).toMatchObject(forbidden);
      }
      expect(await post(`/v1/runs/${run_id}/cancel`, bearer, {})).toMatchObject(forbidden);
      expect(await post(`/v1/runs/${run_id}/approvals/c_refund`, bearer, { approved: true })).toMatchObject(forbidden);
      expect(await json(await call(`/v1/runs/${run_id}/events`, { query: token }))).toMatchObject(forbidden);
    }
    expect(await get(`/v1/threads/${thread('theirs')}`, bearer)).toMatchObject(forbidden);
    // send: another thread, an agent it does not list, fields that need an API key, another tenant.
    expect(await post('/v1/runs', bearer, { agent: 'api_agent', input: 'x', thread_id: thread('theirs') })).toMatchObject({
      ...forbidden,
      body: { detail: `this token enqueues on thread '${mine}' only` },
    });
    expect(await post('/v1/runs', bearer, { agent: 'api_approver', input: 'x' })).toMatchObject({
      ...forbidden,
      body: { detail: "this token cannot enqueue agent 'api_approver' (it may enqueue api_agent)" },
    });
    for (const field of [{ config: { max_iterations: 50 } }, { state: { admin: true } }, { exec_config: { steps: {} } }, { idempotency_key: 'k' }]) {
      expect(await post('/v1/runs', bearer, { agent: 'api_agent', input: 'x', ...field })).toMatchObject(forbidden);
    }
    const tenanted = await createToken({ secret: NEW, thread_id: mine, actions: ['send'], agents: ['api_agent'], tenant: 'acme' });
    expect(await post('/v1/runs', { token: tenanted }, { agent: 'api_agent', input: 'x', tenant: 'other' })).toMatchObject({
      ...forbidden,
      body: { detail: "this token enqueues for tenant 'acme' only" },
    });
    // Its tenant is the tenant of every run it enqueues (SPEC §19, §14), named in the body or not.
    for (const body of [
      { agent: 'api_agent', input: 'wait=1 tenanted' },
      { agent: 'api_agent', input: 'wait=1 named', tenant: 'acme' },
    ]) {
      const tenantRun = (await post('/v1/runs', { token: tenanted }, body)).body.run_id as string;
      expect((await get(`/v1/runs/${tenantRun}`, { key: 'read' })).body).toMatchObject({ tenant: 'acme' });
    }
    // Actions it does not name.
    const reader = { token: await createToken({ secret: NEW, thread_id: mine, actions: ['read'] }) };
    const own = (await post('/v1/runs', bearer, { agent: 'api_agent', input: 'wait=1 own' })).body.run_id as string;
    expect(await post('/v1/runs', reader, { agent: 'api_agent', input: 'x' })).toMatchObject({
      ...forbidden,
      body: { detail: "this token does not allow 'send' (it allows read)" },
    });
    expect(await post(`/v1/runs/${own}/cancel`, reader, {})).toMatchObject(forbidden);
    expect(await post(`/v1/runs/${own}/approvals/c_x`, reader, { approved: true })).toMatchObject(forbidden);
    expect((await get(`/v1/runs/${own}`, reader)).status).toBe(200);
    // Routes without a rule for tokens: listing runs (its thread's runs are on GET /v1/threads/{id}), the deployment, minting.
    expect(await get('/v1/runs', bearer)).toMatchObject({ ...forbidden, body: { detail: expect.stringContaining('GET /v1/threads/{thread_id}') } });
    for (const path of ['/v1/agents', '/v1/queues', '/v1/tenants/acme', '/metrics', '/console/me']) expect(await get(path, bearer), path).toMatchObject(forbidden);
    expect(await json(await call(`/v1/threads/${mine}`, bearer, { method: 'DELETE' }))).toMatchObject(forbidden);
    expect(await post('/v1/tokens', bearer, { thread_id: mine, actions: ['read'] })).toMatchObject(forbidden);
    // ?token= only where an EventSource needs it.
    expect(await json(await call(`/v1/runs/${own}`, { query: token }))).toMatchObject({
      status: 400,
      body: { code: 'invalid_request', detail: expect.stringContaining('?token= is taken only') },
    });
  });

  it('limits a run token to its run: read it, never its thread, another run, or an enqueue', async () => {
    const run_id = await enqueueWithKey({ agent: 'api_agent', input: 'wait=1 single', thread_id: thread('single') });
    const other = await enqueueWithKey({ agent: 'api_agent', input: 'wait=1 same thread', thread_id: thread('single') });
    await until(other, ['completed']);
    const token = await createToken({ secret: NEW, run_id, actions: ['read', 'cancel'] });
    expect((await get(`/v1/runs/${run_id}`, { token })).body).toMatchObject({ run_id, status: 'completed' });
    expect((await readSse(await call(`/v1/runs/${run_id}/stream`, { query: token }))).messages.at(-1)).toMatchObject({ event: 'end' });
    expect(await get(`/v1/runs/${other}`, { token })).toMatchObject(forbidden);
    expect(await get(`/v1/threads/${thread('single')}`, { token })).toMatchObject({ ...forbidden, body: { detail: 'this token is for one run, not a thread' } });
    expect(await post('/v1/runs', { token }, { agent: 'api_agent', input: 'x' })).toMatchObject(forbidden);
    expect((await post(`/v1/runs/${run_id}/cancel`, { token }, {})).body).toMatchObject({ cancelled: false, status: 'completed' });
  });

  it('answers 401 to expired, altered and foreign tokens; rotates (old secret second: accepted; removed: 401)', async () => {
    const scope = { thread_id: thread('rot'), actions: ['read'] as const };
    const fresh = await createToken({ secret: NEW, ...scope, actions: ['read'] });
    const old = await createToken({ secret: OLD, ...scope, actions: ['read'] });
    const path = `/v1/threads/${thread('rot')}`;
    // Known thread or not, the token passes to the route: 404 is the route's answer past the token.
    expect((await get(path, { token: fresh })).status).toBe(404);
    expect((await get(path, { token: old })).status).toBe(404);
    expect((await get(path, { token: fresh }, rotated)).status).toBe(404);
    expect(await get(path, { token: old }, rotated)).toMatchObject({ status: 401, body: { code: 'unauthorized', detail: expect.stringContaining('not valid') } });
    // A token minted by the rotating server is signed with the first secret: the new server takes it.
    const minted = (await post('/v1/tokens', { key: 'write' }, { ...scope })).body.token as string;
    expect((await get(path, { token: minted }, rotated)).status).toBe(404);
    const foreign = await createToken({ secret: 'a-third-secret-nobody-here-holds-0123456789', ...scope, actions: ['read'] });
    expect(await get(path, { token: foreign })).toMatchObject({ status: 401, body: { code: 'unauthorized' } });
    const [header, payload, signature] = fresh.split('.') as [string, string, string];
    const widened = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), thr: thread('theirs') })).toString('base64url');
    expect((await get(`/v1/threads/${thread('theirs')}`, { token: `${header}.${widened}.${signature}` })).status).toBe(401);
    const now = Math.floor(Date.now() / 1000);
    const expired = await new SignJWT({ thr: thread('rot'), act: ['read'] })
      .setProtectedHeader({ alg: 'HS256', typ: 'arcflow+jwt', kid: decodeProtectedHeader(fresh).kid! })
      .setIssuer('arcflow')
      .setAudience('arcflow-serve')
      .setJti('expired-1')
      .setIssuedAt(now - 600)
      .setExpirationTime(now - 60)
      .sign(new TextEncoder().encode(NEW));
    expect(await get(path, { token: expired })).toMatchObject({ status: 401, body: { code: 'unauthorized', detail: 'the token has expired; get a new one' } });
    expect((await json(await call(`/v1/runs/run_x/stream`, { query: expired }))).status).toBe(401);
  });

  it('mints with POST /v1/tokens (write scope), naming a bad request; without ARCFLOW_TOKEN_SECRET answers tokens_disabled and 401 to any token', async () => {
    const minted = await post('/v1/tokens', { key: 'write' }, { thread_id: thread('minted'), actions: ['read', 'send'], agents: ['api_agent'], subject: 'u1', expires_in_s: 120 });
    expect(minted).toMatchObject({ status: 201, body: { token: expect.stringMatching(/^eyJ/) } });
    expect(minted.body.expires_at).toBeGreaterThan(Date.now() + 110_000);
    expect(minted.body.expires_at).toBeLessThanOrEqual(Date.now() + 120_000);
    // enqueued_by is the server's to set: no request body sets it, with a key or a token.
    expect(await post('/v1/runs', { key: 'write' }, { agent: 'api_agent', input: 'x', enqueued_by: 'token:forged' })).toMatchObject({
      status: 400,
      body: { code: 'invalid_request' },
    });
    expect(await post('/v1/runs', { token: minted.body.token }, { agent: 'api_agent', input: 'x', enqueued_by: 'token:forged' })).toMatchObject({
      status: 400,
      body: { code: 'invalid_request' },
    });
    const run_id = (await post('/v1/runs', { token: minted.body.token }, { agent: 'api_agent', input: 'wait=1 minted' })).body.run_id as string;
    expect((await get(`/v1/runs/${run_id}`, { key: 'read' })).body.enqueued_by).toBe('token:u1');
    expect(await post('/v1/tokens', { key: 'read' }, { thread_id: 't', actions: ['read'] })).toMatchObject(forbidden);
    expect((await post('/v1/tokens', { key: 'write' }, { thread_id: 't', run_id: 'r', actions: ['read'] })).body).toMatchObject({
      status: 400,
      code: 'invalid_request',
      detail: expect.stringContaining('name exactly one of thread_id and run_id'),
    });
    expect((await post('/v1/tokens', { key: 'write' }, { thread_id: 't', actions: ['send'] })).body).toMatchObject({
      status: 400,
      detail: expect.stringContaining('send needs agents'),
    });
    expect((await post('/v1/tokens', { key: 'write' }, { thread_id: 't', actions: ['delete'] })).body).toMatchObject({ status: 400, code: 'invalid_request' });
    expect((await post('/v1/tokens', { key: 'write' }, { thread_id: 't', actions: ['read'], expires_in_s: 86_401 })).body).toMatchObject({ status: 400 });
    expect(await post('/v1/tokens', { key: 'write' }, { thread_id: 't', actions: ['read'] }, disabled)).toMatchObject({
      status: 400,
      body: { code: 'tokens_disabled', detail: expect.stringContaining('ARCFLOW_TOKEN_SECRET') },
    });
    expect(await get(`/v1/threads/${thread('minted')}`, { token: minted.body.token }, disabled)).toMatchObject({
      status: 401,
      body: { code: 'unauthorized', detail: 'this server takes no tokens: ARCFLOW_TOKEN_SECRET is not set' },
    });
  });

  it('prints a token with `arcflow token` that serve takes, and never logs a token', async () => {
    const cli = (args: string[], secret = NEW) =>
      run(process.execPath, [ARCFLOW_BIN, 'token', ...args], { env: { ...process.env, ARCFLOW_TOKEN_SECRET: secret } }).then(
        ({ stdout }) => ({ code: 0, stdout, stderr: '' }),
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
    const made = await cli(['--thread', thread('cli'), '--actions', 'read,send', '--agents', 'api_agent', '--subject', 'cli-user', '--expires-in', '60']);
    const token = made.stdout.trim();
    const run_id = (await post('/v1/runs', { token }, { agent: 'api_agent', input: 'wait=1 from the cli' })).body.run_id as string;
    expect((await until(run_id, ['completed'])).enqueued_by).toBe('token:cli-user');
    expect(await cli(['--thread', 't', '--actions', 'read,write'])).toMatchObject({ code: 1, stderr: 'arcflow: unknown action "write" (actions: read, send, cancel, respond)\n' });
    expect(await cli(['--thread', 't', '--actions', 'read'], 'short')).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('ARCFLOW_TOKEN_SECRET: the secret is 5 bytes; it must be at least 32'),
    });
    // Through the header and the query, on each server: no log line holds a token.
    await readSse(await call(`/v1/runs/${run_id}/events`, { query: token }, { headers: { accept: 'text/event-stream' } }));
    await (await call(`/v1/runs/${run_id}/events`, { query: token }, {}, disabled)).text();
    // A key the query parser decodes to `token` is one too, and so is one after a `#` (the router reads on past it).
    // (sent as is: fetch would keep a fragment to itself)
    for (const query of [`?%74oken=${token}&limit=5`, `#token=${token}`, `?limit=5#&token=${token}`]) {
      expect(await rawGetStatus(`${rotating.url}/v1/runs/${run_id}/events${query}`), query.slice(0, 12)).toBe(200);
    }
    expect(rotating.output()).toContain("end users' tokens on (ARCFLOW_TOKEN_SECRET)");
    expect(disabled.output()).not.toContain("end users' tokens on");
    const logs = rotating.output() + disabled.output();
    expect(logs).toContain('token=[redacted]');
    expect(logs).not.toContain(token);
    expect(logs).not.toContain(token.split('.')[2]);
  });

  it('documents the token routes in the OpenAPI document: POST /v1/tokens, ?token= on the GET events and stream routes, 401 and 403 on every route that needs a credential', async () => {
    const document = (await (await fetch(`${rotating.url}/openapi.json`)).json()) as Record<string, any>;
    await SwaggerParser.validate(structuredClone(document) as never);
    expect(document.components.securitySchemes.token_query).toEqual(expect.objectContaining({ type: 'apiKey', in: 'query', name: 'token' }));
    expect(Object.keys(document.paths['/v1/tokens'].post.responses).sort()).toEqual(['201', '400', '401', '403', '429']);
    expect(JSON.stringify(document.paths['/v1/tokens'].post.requestBody.content['application/json'].schema.properties.actions.items)).toContain('respond');
    for (const path of ['/v1/runs/{run_id}/events', '/v1/runs/{run_id}/stream']) {
      // The `token` parameter is the token_query scheme's (OpenAPI documents a credential as a scheme, not a parameter).
      expect(document.paths[path].get.security).toEqual([{ bearer: [] }, { token_query: [] }]);
    }
    expect(document.paths['/v1/runs/{run_id}'].get.security).toBeUndefined();
    for (const [path, methods] of Object.entries(document.paths as Record<string, Record<string, { responses: Record<string, unknown>; security?: unknown[] }>>)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (operation.security?.length === 0) continue;
        expect(Object.keys(operation.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['401', '403']));
      }
    }
    expect(document.components.schemas.RunRecord.properties.enqueued_by).toMatchObject({ type: 'string' });
    // Every documented route that needs a credential, asked about another thread's run and thread by a token with every action: 403.
    const others = await enqueueWithKey({ agent: 'api_agent', input: 'wait=1 not yours', thread_id: thread('not-yours') });
    const token = await createToken({ secret: NEW, thread_id: thread('guard'), actions: ['read', 'send', 'cancel', 'respond'], agents: ['api_agent'] });
    for (const [path, methods] of Object.entries(document.paths as Record<string, Record<string, { security?: unknown[] }>>)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (operation.security?.length === 0) continue;
        const url = path.replace('{run_id}', others).replace('{tool_call_id}', 'c_refund').replace('{thread_id}', thread('not-yours'));
        const body =
          method === 'get' || method === 'delete' ? undefined : JSON.stringify(path === '/v1/runs' ? { agent: 'api_agent', input: 'x', thread_id: thread('not-yours') } : {});
        expect(await json(await call(url, { token }, { method: method.toUpperCase(), ...(body ? { body } : {}) })), `${method} ${path}`).toMatchObject(forbidden);
      }
    }
  });
});

/** GET `url` with its path sent as it is, a `#` included; the answer's status. */
function rawGetStatus(url: string): Promise<number> {
  const { host, pathname } = new URL(url);
  const path = url.slice(url.indexOf(pathname));
  return new Promise((resolve, reject) => {
    const request = httpGet({ host: host.split(':')[0], port: Number(host.split(':')[1]), path }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', reject);
  });
}
