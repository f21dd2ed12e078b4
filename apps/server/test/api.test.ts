import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import { keysFor } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { ARCFLOW_BIN, type WorkerProcess, spawnWorker } from '@arcflow/worker';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, readSse, spawnServe } from './harness.ts';

const run = promisify(execFile);
const FIXTURE = new URL('./fixtures/api-agents.ts', import.meta.url).pathname;
const prefix = testPrefix('api');
const KEYS = { read: 'read-secret-0123456789', write: 'write-secret-0123456789', admin: 'admin-secret-0123456789' };
const env = {
  REDIS_URL: TEST_REDIS_URL,
  ARCFLOW_PREFIX: prefix,
  ARCFLOW_API_KEYS: `viewer:${KEYS.read}:read,backend:${KEYS.write}:write,ops:${KEYS.admin}:admin`,
  ARCFLOW_SSE_HEARTBEAT_MS: '200',
  ARCFLOW_API_RATE: '1000',
};
let serve: ServeProcess;
let worker: WorkerProcess;

beforeAll(async () => {
  [serve, worker] = await Promise.all([spawnServe(env), spawnWorker(FIXTURE, { env: { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix } })]);
});
afterAll(async () => {
  await Promise.all([serve?.stop(), worker?.stop()]);
  await cleanupPrefix(prefix);
});

const call = (path: string, init: RequestInit & { key?: keyof typeof KEYS | null } = {}) => {
  const { key = 'admin', headers, ...rest } = init;
  return fetch(`${serve.url}${path}`, {
    ...rest,
    headers: { ...(key ? { authorization: `Bearer ${KEYS[key]}` } : {}), ...(rest.body ? { 'content-type': 'application/json' } : {}), ...(headers as Record<string, string>) },
  });
};
const json = async (response: Response) => ({ status: response.status, type: response.headers.get('content-type'), body: (await response.json()) as Record<string, any> });
const enqueue = (body: unknown, key: keyof typeof KEYS = 'write') => call('/v1/runs', { method: 'POST', body: JSON.stringify(body), key }).then(json);

describe('arcflow serve: the HTTP API against a real server, Redis and worker', () => {
  it('enqueues (201), repeats an idempotency key (200, same run), reads, lists and waits for a run', async () => {
    const created = await enqueue({ agent: 'api_agent', input: 'wait=10 first', idempotency_key: `api-${prefix}` });
    expect(created.status).toBe(201);
    const again = await enqueue({ agent: 'api_agent', input: 'wait=10 first', idempotency_key: `api-${prefix}` });
    expect(again).toMatchObject({ status: 200, body: { run_id: created.body.run_id } });
    // The same key with another request is a conflict, and queues nothing.
    const conflict = await enqueue({ agent: 'api_agent', input: 'wait=10 other', idempotency_key: `api-${prefix}` });
    expect(conflict).toMatchObject({ status: 409, body: { code: 'idempotency_conflict', detail: expect.stringContaining(`run '${created.body.run_id}'`) } });
    // A misspelt field is named with the nearest known one, not as "additional properties".
    const misspelt = await enqueue({ agent: 'api_agent', input: 'hi', threadId: 'user-1:chat' });
    expect(misspelt).toMatchObject({
      status: 400,
      body: { code: 'invalid_request', detail: expect.stringContaining("unknown enqueue option 'threadId'; did you mean 'thread_id'?") },
    });
    let record: Record<string, any> = {};
    for (let tries = 0; tries < 100 && record.status !== 'completed'; tries += 1) {
      record = (await json(await call(`/v1/runs/${created.body.run_id}`, { key: 'read' }))).body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(record).toMatchObject({
      run_id: created.body.run_id,
      status: 'completed',
      agent: 'api_agent',
      output: 'done: wait=10 first',
      iterations: 3,
      trace_id: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    const list = await json(await call('/v1/runs?status=completed&agent=api_agent&limit=5', { key: 'read' }));
    expect(list.body.runs.map((run: { run_id: string }) => run.run_id)).toContain(created.body.run_id);
    const events = await json(await call(`/v1/runs/${created.body.run_id}/events`, { key: 'read' }));
    expect(events.body.map((event: { seq: number }) => event.seq)).toEqual(events.body.map((_: unknown, index: number) => index + 1));
    expect(events.body.at(-1)).toMatchObject({ kind: 'RunCompleted' });
  });

  it('enqueues with a state (SPEC §17), returns the state the last round left, and refuses a state that is no object or too large (400, naming state)', async () => {
    const created = await enqueue({ agent: 'api_agent', input: 'wait=10 fact=oslo', state: { facts: ['given'], trip: { days: 3 } } });
    expect(created.status).toBe(201);
    let record: Record<string, any> = {};
    for (let tries = 0; tries < 100 && record.status !== 'completed'; tries += 1) {
      record = (await json(await call(`/v1/runs/${created.body.run_id}`, { key: 'read' }))).body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(record).toMatchObject({ status: 'completed', state: { facts: ['given', 'oslo-1', 'oslo-2'], trip: { days: 3 } } });
    const events = (await json(await call(`/v1/runs/${created.body.run_id}/events`, { key: 'read' }))).body as Record<string, any>[];
    expect(events.filter((event) => event.kind === 'StateUpdated').map(({ iteration, keys }) => ({ iteration, keys }))).toEqual([
      { iteration: 1, keys: ['facts'] },
      { iteration: 2, keys: ['facts'] },
    ]);
    expect(JSON.stringify(events)).not.toContain('oslo-');
    // Without one, a run's state is {}.
    const plain = await enqueue({ agent: 'api_agent', input: 'wait=1 no state' });
    expect((await json(await call(`/v1/runs/${plain.body.run_id}`, { key: 'read' }))).body.state).toEqual({});

    for (const state of [['a'], 'facts', 7, null]) {
      expect((await enqueue({ agent: 'api_agent', input: 'x', state })).body).toMatchObject({
        status: 400,
        code: 'invalid_request',
        detail: expect.stringContaining('state'),
      });
    }
    expect((await enqueue({ agent: 'api_agent', input: 'x', state: { blob: 'x'.repeat(300_000) } })).body).toMatchObject({
      status: 400,
      code: 'invalid_request',
      detail: "state is 300011 bytes of JSON, over the agent's max_state_bytes (262144)",
    });
  });

  it("answers a run's conversation (read scope): the tool calls with their arguments, the tool results and the answer; a workflow's step by step", async () => {
    const ended = async (run_id: string) => {
      let record: Record<string, any> = {};
      for (let tries = 0; tries < 200 && !['completed', 'failed'].includes(record.status); tries += 1) {
        record = (await json(await call(`/v1/runs/${run_id}`, { key: 'read' }))).body;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return record;
    };
    const created = await enqueue({ agent: 'api_agent', input: 'wait=1 talk' });
    expect(await ended(created.body.run_id)).toMatchObject({ status: 'completed' });
    const answered = await json(await call(`/v1/runs/${created.body.run_id}/messages`, { key: 'read' }));
    expect(answered.status).toBe(200);
    const call1 = { id: 'call_1', type: 'function', function: { name: 'api_pause', arguments: '{"ms":1}' } };
    const call2 = { ...call1, id: 'call_2' };
    expect(answered.body).toEqual({
      run_id: created.body.run_id,
      messages: [
        { role: 'user', content: 'wait=1 talk' },
        { role: 'assistant', content: null, tool_calls: [call1] },
        { role: 'tool', tool_call_id: 'call_1', content: 'paused 1 ms' },
        { role: 'assistant', content: null, tool_calls: [call2] },
        { role: 'tool', tool_call_id: 'call_2', content: 'paused 1 ms' },
        { role: 'assistant', content: 'done: wait=1 talk' },
      ],
    });

    const flow = await enqueue({ agent: 'api_flow', input: 'flow' });
    expect(await ended(flow.body.run_id)).toMatchObject({ status: 'completed' });
    const steps = (await json(await call(`/v1/runs/${flow.body.run_id}/messages`, { key: 'read' }))).body;
    expect(steps).toMatchObject({ run_id: flow.body.run_id, messages: [], steps: [{ step_id: 'answer' }] });
    expect(steps.steps[0].messages.at(0)).toMatchObject({ role: 'user', content: expect.stringContaining('wait=50') });
    expect(steps.steps[0].messages.at(-1)).toEqual({ role: 'assistant', content: expect.stringMatching(/^done: wait=50/) });

    expect((await json(await call('/v1/runs/run_doesnotexist/messages', { key: 'read' }))).body).toMatchObject({ status: 404, code: 'unknown_run' });
    expect((await call(`/v1/runs/${created.body.run_id}/messages`, { key: null })).status).toBe(401);
  });

  it('answers problems: 401 without or with a wrong key, 403 for too little scope or test mode without admin, 404, 400, 413', async () => {
    const none = await json(await call('/v1/runs', { key: null }));
    expect(none).toMatchObject({
      status: 401,
      type: expect.stringMatching(/^application\/problem\+json/),
      body: { status: 401, code: 'unauthorized', title: 'Unauthorized', type: expect.any(String), detail: expect.any(String) },
    });
    const wrong = await json(await fetch(`${serve.url}/v1/runs`, { headers: { authorization: 'Bearer not-a-key-at-all-0000' } }));
    expect(wrong.status).toBe(401);
    expect((await enqueue({ agent: 'api_agent', input: 'x' }, 'read')).body).toMatchObject({ status: 403, code: 'forbidden' });
    const testMode = { agent: 'api_agent', input: 'x', exec_config: { test: { steps: { s1: { output: 'fixed' } } } } };
    expect((await enqueue(testMode, 'write')).body).toMatchObject({ status: 403, detail: expect.stringContaining("'admin' scope") });
    expect((await enqueue(testMode, 'admin')).status).toBe(201);
    expect((await enqueue({ agent: 'api_agnet', input: 'x' })).body).toMatchObject({
      status: 404,
      code: 'unknown_agent',
      detail: expect.stringContaining("did you mean 'api_agent'"),
    });
    // As the client words it: the prefix it was looked for under.
    expect((await json(await call('/v1/runs/run_doesnotexist'))).body).toMatchObject({
      status: 404,
      code: 'unknown_run',
      detail: expect.stringMatching(/^unknown run 'run_doesnotexist' \(looked under prefix '.+'\)$/),
    });
    expect((await json(await call('/v1/runs/bad%20id'))).body).toMatchObject({ status: 400, code: 'invalid_run_id' });
    // What the router refuses before any route answers as a problem too.
    expect(await json(await call(`/v1/runs/${'r'.repeat(300)}/events`))).toMatchObject({
      status: 414,
      type: expect.stringMatching(/^application\/problem\+json/),
      body: { code: 'uri_too_long' },
    });
    expect((await json(await call(`/v1/runs/${'r'.repeat(150)}`))).body).toMatchObject({
      status: 400,
      code: 'invalid_run_id',
      detail: expect.stringMatching(/^run_id must match/),
    });
    // A body's names in the client's words, not the schema's; a field the server sets itself, said so.
    expect((await enqueue({ agent: 'api_agent', input: 'x', tenant: 'bad tenant' })).body).toMatchObject({ status: 400, detail: expect.stringMatching(/^tenant must match/) });
    expect((await enqueue({ agent: 'api_agent', input: 'x', idempotency_key: 5 })).body).toMatchObject({ status: 400, detail: expect.stringMatching(/^idempotency_key must be/) });
    expect((await enqueue({ agent: 'api_agent', input: 'x', enqueued_by: 'me' })).body).toMatchObject({
      status: 400,
      detail: expect.stringContaining('enqueued_by is not a field of the request'),
    });
    const prototype = await call('/v1/runs', { method: 'POST', body: '{"agent":"api_agent","input":"x","__proto__":{"a":1}}', key: 'write' });
    expect((await json(prototype)).body).toMatchObject({ status: 400, detail: expect.stringContaining('a property named __proto__') });
    expect(await json(await call('/v1/runs/%zz'))).toMatchObject({ status: 400, type: expect.stringMatching(/^application\/problem\+json/), body: { code: 'invalid_request' } });
    expect((await enqueue({ agent: 'api_agent' })).body).toMatchObject({ status: 400, code: 'invalid_request' });
    expect((await enqueue({ agent: 'api_agent', input: 'x', surprise: 1 })).body).toMatchObject({ status: 400, code: 'invalid_request' });
    expect((await enqueue({ agent: 'api_agent', input: 'x', config: { tool_execution: { max_iterations: 0 } } })).body).toMatchObject({ status: 400, code: 'invalid_config' });
    // Refused in the client's words (SPEC §8: the same codes and messages).
    expect((await json(await call('/v1/runs?limit=0'))).body).toMatchObject({ status: 400, code: 'invalid_request', detail: 'limit must be an integer from 1 to 1000, got 0' });
    expect((await json(await call('/v1/runs?limit=600'))).status).toBe(200);
    // A schema's unknown name is named.
    expect((await json(await call('/v1/runs?stauts=completed'))).body).toMatchObject({ status: 400, detail: "unknown query parameter 'stauts'" });
    expect((await enqueue({ agent: 'api_agent', input: 'x', priority: 11 })).body).toMatchObject({
      status: 400,
      detail: 'priority must be an integer from 1 (first) to 10, got 11',
    });
    expect((await enqueue({ agent: 'api_agent', input: 'x', idempotency_key: 'k'.repeat(201) })).body).toMatchObject({
      status: 400,
      detail: expect.stringMatching(/^idempotency_key must be 1-200 characters of letters, digits, _ \. -/),
    });
    expect((await enqueue({ agent: 'api_agent', input: 'x'.repeat(300 * 1024) })).body).toMatchObject({ status: 413, code: 'input_too_large' });
    expect((await enqueue({ agent: 'api_agent', input: 'x', config: { pad: 'y'.repeat(1_100_000) } })).body).toMatchObject({ status: 413, code: 'payload_too_large' });
    expect((await json(await call('/v2/nothing'))).body).toMatchObject({ status: 404, code: 'not_found' });
    const badJson = await json(await call('/v1/runs', { method: 'POST', body: '{"agent":', key: 'write' }));
    expect(badJson.body).toMatchObject({ status: 400, code: 'invalid_request' });
  });

  it('enqueues a list of messages, and answers a bad one with a 400 problem naming its index and field', async () => {
    const input = [
      { role: 'system', content: 'Be quick.' },
      { role: 'user', content: 'wait=10 from messages' },
    ];
    const created = await enqueue({ agent: 'api_agent', input });
    expect(created.status).toBe(201);
    let record: Record<string, any> = {};
    for (let tries = 0; tries < 100 && record.status !== 'completed'; tries += 1) {
      record = (await json(await call(`/v1/runs/${created.body.run_id}`, { key: 'read' }))).body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(record).toMatchObject({ status: 'completed', output: 'done: wait=10 from messages' });

    const bad = await enqueue({
      agent: 'api_agent',
      input: [
        { role: 'user', content: 'hi' },
        { role: 'tool', content: 'x' },
      ],
    });
    expect(bad).toMatchObject({
      status: 400,
      type: expect.stringMatching(/^application\/problem\+json/),
      body: { status: 400, code: 'invalid_input', detail: 'input[1].tool_call_id: required on a tool message (a non-empty string)' },
    });
    expect((await enqueue({ agent: 'api_agent', input: [{ role: 'user', content: [{ type: 'text', text: 7 }] }] })).body).toMatchObject({
      status: 400,
      detail: 'input[0].content[0].text: expected a string',
    });
    expect((await enqueue({ agent: 'api_agent', input: {} })).body).toMatchObject({ status: 400, detail: 'input: expected a string or a list of messages' });
    expect((await enqueue({ agent: 'api_flow', input })).body).toMatchObject({
      status: 400,
      code: 'invalid_input',
      detail: expect.stringContaining("workflow 'api_flow' takes a string"),
    });
  });

  it('follows a run over SSE and resumes after a dropped connection with nothing lost or repeated', async () => {
    const { body } = await enqueue({ agent: 'api_agent', input: 'wait=300 follow me' });
    const sse = { accept: 'text/event-stream' };
    const first = await call(`/v1/runs/${body.run_id}/events`, { key: 'read', headers: sse });
    expect(first.headers.get('content-type')).toContain('text/event-stream');
    expect(first.headers.get('cache-control')).toBe('no-cache');
    // Drop the connection after the first tool call started.
    const part = await readSse(first, (message) => message.event === 'ToolCallStarted');
    const lastId = part.messages.at(-1)!.id!;
    const second = await call(`/v1/runs/${body.run_id}/events`, { key: 'read', headers: { ...sse, 'last-event-id': lastId } });
    const rest = await readSse(second);
    const all = [...part.messages, ...rest.messages];
    const seqs = all.map((message) => Number(message.id));
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));
    expect(all.at(-1)).toMatchObject({ event: 'RunCompleted' });
    for (const message of all) expect(JSON.parse(message.data!)).toMatchObject({ seq: Number(message.id), kind: message.event });
    // The tool calls take 600 ms: the idle stream got heartbeats.
    expect(rest.comments).toBeGreaterThanOrEqual(2);
    const array = (await json(await call(`/v1/runs/${body.run_id}/events`, { key: 'read' }))).body;
    expect(all.map((message) => JSON.parse(message.data!))).toEqual(array);
    // A reconnect after the last event of an ended run gets nothing more, and the stream ends.
    const late = await readSse(await call(`/v1/runs/${body.run_id}/events`, { key: 'read', headers: { ...sse, 'last-event-id': String(seqs.length) } }));
    expect(late.messages).toEqual([]);
    const middle = await readSse(await call(`/v1/runs/${body.run_id}/events`, { key: 'read', headers: { ...sse, 'last-event-id': '3' } }));
    expect(middle.messages.map((message) => Number(message.id))).toEqual(seqs.slice(3));
  });

  it("ends an SSE follow of a run whose log holds a line that is not an event (another process's write), live or ended, and logs why", async () => {
    const { body } = await enqueue({ agent: 'api_agent', input: 'wait=300 corrupt' });
    const redis = new Redis(TEST_REDIS_URL);
    try {
      await redis.rpush(keysFor(prefix).run(body.run_id).events, 'not json');
      const sse = { accept: 'text/event-stream' };
      const live = await readSse(await call(`/v1/runs/${body.run_id}/events`, { key: 'read', headers: sse }));
      expect(live.messages).toEqual([]);
      for (let tries = 0; tries < 100 && (await json(await call(`/v1/runs/${body.run_id}`, { key: 'read' }))).body.status === 'running'; tries += 1)
        await new Promise((resolve) => setTimeout(resolve, 50));
      const ended = await readSse(await call(`/v1/runs/${body.run_id}/events`, { key: 'read', headers: sse }));
      expect(ended.messages).toEqual([]);
      expect(serve.output()).toContain('run events cannot be read');
    } finally {
      await redis.quit();
    }
  });

  it('cancels a run (write scope), and lists agents and queues', async () => {
    const { body } = await enqueue({ agent: 'api_agent', input: 'wait=5000 long' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await json(await call(`/v1/runs/${body.run_id}/cancel`, { method: 'POST', key: 'read' }))).status).toBe(403);
    const cancelled = await json(await call(`/v1/runs/${body.run_id}/cancel`, { method: 'POST', key: 'write' }));
    expect(cancelled).toMatchObject({ status: 200, body: { cancelled: true, status: 'cancelled' } });
    // Said to be JSON with no body at all (as some HTTP clients send a POST): answered as without one.
    const again = await json(await call(`/v1/runs/${body.run_id}/cancel`, { method: 'POST', key: 'write', headers: { 'content-type': 'application/json' } }));
    expect(again).toMatchObject({ status: 200, body: { cancelled: false, status: 'cancelled' } });
    // A body that is not JSON still is refused; a route that needs a body refuses none.
    expect((await json(await call('/v1/runs', { method: 'POST', key: 'write', body: '{"agent":' }))).body).toMatchObject({
      status: 400,
      detail: 'the request body is not valid JSON',
    });
    expect((await json(await call('/v1/runs', { method: 'POST', key: 'write', headers: { 'content-type': 'application/json' } }))).status).toBe(400);
    // A body of another type is refused 415, text/plain too.
    expect((await json(await call('/v1/runs', { method: 'POST', key: 'write', body: 'hi', headers: { 'content-type': 'text/plain' } }))).body).toMatchObject({
      status: 415,
      code: 'unsupported_media_type',
    });
    const agents = await json(await call('/v1/agents', { key: 'read' }));
    expect(agents.body).toEqual({
      agents: [
        { name: 'api_agent', kind: 'agent', tools: ['api_pause'], live_workers: 1 },
        { name: 'api_approver', kind: 'agent', tools: ['api_refund'], live_workers: 1 },
        {
          name: 'api_flow',
          kind: 'workflow',
          tools: ['api_pause'],
          live_workers: 1,
          steps: [
            { id: 'prepare', type: 'tool', depends_on: [] },
            { id: 'answer', type: 'agent', depends_on: ['prepare'] },
          ],
        },
      ],
    });
    const queues = await json(await call('/v1/queues', { key: 'read' }));
    expect(queues.body.queues.map((queue: { name: string }) => queue.name)).toEqual([
      'agent-api_agent',
      'agent-api_approver',
      'agent-api_flow',
      // A tool's queue is its definition's: name, then definition hash.
      expect.stringMatching(/^tool-api_pause-[0-9a-f]{16}$/),
      expect.stringMatching(/^tool-api_refund-[0-9a-f]{16}$/),
    ]);
    for (const queue of queues.body.queues)
      expect(queue).toMatchObject({ waiting: expect.any(Number), active: expect.any(Number), delayed: expect.any(Number), failed: expect.any(Number), workers: 1 });
  });

  it('lists a waiting call with its arguments and takes its approval (write scope), once', async () => {
    const { body } = await enqueue({ agent: 'api_approver', input: 'refund o-7' });
    let record: Record<string, any> = {};
    for (let tries = 0; tries < 200 && record.status !== 'waiting'; tries += 1) {
      record = (await json(await call(`/v1/runs/${body.run_id}`, { key: 'read' }))).body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(record.pending_approvals).toEqual([expect.objectContaining({ tool_call_id: 'c_refund', tool_name: 'api_refund', arguments: { order: 'o-7' } })]);
    const approve = (key: keyof typeof KEYS, id: string, answer: unknown) =>
      call(`/v1/runs/${body.run_id}/approvals/${id}`, { method: 'POST', key, body: JSON.stringify(answer) }).then(json);
    expect((await approve('read', 'c_refund', { approved: true })).status).toBe(403);
    expect((await approve('write', 'c_refund', { approved: 'yes' })).body).toMatchObject({ status: 400, code: 'invalid_request' });
    const first = await approve('write', 'c_refund', { approved: true, by: 'dana' });
    expect(first).toMatchObject({ status: 200, body: { approved: true, by: 'dana', resolved_at: expect.any(Number) } });
    expect((await approve('write', 'c_refund', { approved: false })).body).toEqual(first.body);
    expect((await approve('write', 'c_other', { approved: true })).body).toMatchObject({ status: 409, code: 'not_pending' });
    let done: Record<string, any> = {};
    for (let tries = 0; tries < 200 && done.status !== 'completed'; tries += 1) {
      done = (await json(await call(`/v1/runs/${body.run_id}`, { key: 'read' }))).body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(done.output).toBe('refunded o-7');
  });

  it('answers any body, query, id and key with a result or a problem document, never a 500 (property)', async () => {
    const junk = fc.jsonValue({ maxDepth: 3 });
    const text = fc.oneof(fc.string(), fc.constantFrom('%', '..', 'run_x', 'a'.repeat(300), '-1', 'NaN', 'Bearer x'));
    const body = fc.oneof(
      fc.record(
        {
          agent: fc.oneof(fc.constantFrom('api_agent', 'api_flow'), junk),
          input: fc.oneof(fc.string(), junk),
          config: junk,
          exec_config: junk,
          idempotency_key: junk,
          state: junk,
        },
        { requiredKeys: [] },
      ),
      junk,
    );
    const answers = (response: Response) => response.status < 500 && (response.ok || /^application\/problem\+json/.test(response.headers.get('content-type') ?? ''));
    const redis = new Redis(TEST_REDIS_URL);
    // Run records (a finished run's record stays when the run is compacted; its other keys go).
    const runCount = async () => (await redis.keys(`{${prefix}}:run:*`)).filter((key) => /:run:[^:]+$/.test(key)).length;
    const before = await runCount();
    let created = 0;
    await fc.assert(
      fc.asyncProperty(body, text, text, text, async (sent, query, id, secret) => {
        const posted = await call('/v1/runs', { method: 'POST', body: JSON.stringify(sent), key: 'write' });
        if (posted.status === 201) created += 1;
        const responses = [
          posted,
          await call('/v1/runs', { method: 'POST', body: query, key: 'write' }),
          await call(`/v1/runs?status=${encodeURIComponent(query)}&limit=${encodeURIComponent(id)}&cursor=${encodeURIComponent(id)}&agent=${encodeURIComponent(query)}`),
          await call(`/v1/runs/${encodeURIComponent(id)}`),
          await call(`/v1/runs/${encodeURIComponent(id)}/events`),
          await call(`/v1/runs/${encodeURIComponent(id)}/cancel`, { method: 'POST', body: query }),
          await call(`/v1/runs/run_AAAAAAAAAAAAAAAAAAAAAA/approvals/${encodeURIComponent(id)}`, { method: 'POST', body: JSON.stringify(sent) }),
          await fetch(`${serve.url}/v1/agents`, { headers: { authorization: secret.replace(/[^\x20-\x7e]/g, '') } }),
        ];
        for (const response of responses) {
          expect(answers(response)).toBe(true);
          await response.body?.cancel();
        }
      }),
      { numRuns: 150 },
    );
    // A refused request created nothing: the runs are the ones answered 201.
    expect((await runCount()) - before).toBe(created);
    await redis.quit();
  });

  it('answers health checks without a key, sends no CORS headers, and never logs a secret', async () => {
    expect(await json(await fetch(`${serve.url}/healthz`))).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(await json(await fetch(`${serve.url}/readyz`))).toMatchObject({ status: 200, body: { status: 'ready' } });
    const response = await call('/v1/agents', { headers: { origin: 'http://evil.example' } });
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    const log = serve.output();
    for (const secret of Object.values(KEYS)) expect(log).not.toContain(secret);
    expect(log).toContain('"url":"/v1/agents"');
  });

  it('publishes an OpenAPI 3.1 document that validates, and every route in it answers as documented', async () => {
    const document = (await (await fetch(`${serve.url}/openapi.json`)).json()) as Record<string, any>;
    expect(document.openapi).toBe('3.1.0');
    await SwaggerParser.validate(structuredClone(document) as never);
    // The run state (SPEC §17): given at enqueue, returned in the record, both JSON objects.
    expect(document.paths['/v1/runs'].post.requestBody.content['application/json'].schema.properties.state).toMatchObject({ type: 'object' });
    expect(document.components.schemas.RunRecord.properties.state).toMatchObject({ type: 'object' });
    // Every chunk type a run's stream can hold (SPEC §12, §20), with an external call's input.
    const chunkTypes = (document.components.schemas.StreamChunk.properties.type.anyOf as { const?: string; enum?: string[] }[]).map((each) => each.const ?? each.enum?.[0]);
    expect(chunkTypes.sort()).toEqual(['end', 'reset', 'text', 'tool_approval', 'tool_call', 'tool_input', 'tool_result']);
    expect(document.components.schemas.StreamChunk.properties).toHaveProperty('input');
    const { body: run } = await enqueue({ agent: 'api_agent', input: 'wait=1 doc' });
    const paths = Object.entries(document.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>);
    expect(paths.map(([path]) => path).sort()).toEqual([
      '/healthz',
      '/metrics',
      '/readyz',
      '/v1/agents',
      '/v1/overview',
      '/v1/queues',
      '/v1/runs',
      '/v1/runs/bulk',
      '/v1/runs/{run_id}',
      '/v1/runs/{run_id}/approvals/{tool_call_id}',
      '/v1/runs/{run_id}/cancel',
      '/v1/runs/{run_id}/events',
      '/v1/runs/{run_id}/fork',
      '/v1/runs/{run_id}/messages',
      '/v1/runs/{run_id}/retry',
      '/v1/runs/{run_id}/stream',
      '/v1/runs/{run_id}/tool-results/{tool_call_id}',
      '/v1/tenants/{tenant}',
      '/v1/threads/{thread_id}',
      '/v1/tokens',
    ]);
    for (const [path, methods] of paths) {
      for (const [method, operation] of Object.entries(methods)) {
        const url = path.replace('{run_id}', run.run_id).replace('{tool_call_id}', 'c_none').replace('{thread_id}', 'doc-thread').replace('{tenant}', 'doc-tenant');
        const response = await call(url, {
          method: method.toUpperCase(),
          ...(method === 'post' && path === '/v1/runs' ? { body: JSON.stringify({ agent: 'api_agent', input: 'doc' }) } : {}),
        });
        expect(Object.keys(operation.responses), `${method} ${path}`).toContain(String(response.status));
        await response.body?.cancel();
      }
    }
  });
});

describe('clients in other languages', () => {
  it('runs the Python example (standard library only): enqueue, follow the stream, print the outcome', async () => {
    const script = new URL('../../../examples/http/follow_run.py', import.meta.url).pathname;
    const { stdout } = await run('python3', [script, 'api_agent', 'wait=10 from python'], {
      env: { ...process.env, ARCFLOW_URL: serve.url, ARCFLOW_KEY: KEYS.write },
      timeout: 30_000,
    });
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^run run_/);
    expect(lines.slice(1, -1).map((line) => Number(line.trim().split(/\s+/)[0]))).toEqual(lines.slice(1, -1).map((_, index) => index + 1));
    expect(lines.at(-2)).toContain('RunCompleted');
    expect(lines.at(-1)).toBe('completed: done: wait=10 from python');
  });
});

describe('arcflow serve: limits and refusals', () => {
  it('runs on a thread (thread_id), queues and rejects (409 thread_busy) behind its active run, reads and deletes the thread', async () => {
    const thread = `t-${prefix}`;
    const first = await enqueue({ agent: 'api_agent', input: 'wait=300 one', thread_id: thread });
    expect(first.status).toBe(201);
    const rejected = await enqueue({ agent: 'api_agent', input: 'wait=10 never', thread_id: thread, on_busy: 'reject' });
    expect(rejected).toMatchObject({ status: 409, body: { code: 'thread_busy' } });
    // Not deleted while a run of it is active.
    expect(await json(await call(`/v1/threads/${thread}`, { method: 'DELETE', key: 'write' }))).toMatchObject({ status: 409, body: { code: 'thread_busy' } });
    const second = await enqueue({ agent: 'api_agent', input: 'wait=10 two', thread_id: thread });
    expect(second.status).toBe(201);
    let record: Record<string, any> = {};
    for (let tries = 0; tries < 200 && record.status !== 'completed'; tries += 1) {
      record = (await json(await call(`/v1/runs/${second.body.run_id}`, { key: 'read' }))).body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(record).toMatchObject({ status: 'completed', thread_id: thread });
    const read = await json(await call(`/v1/threads/${thread}`, { key: 'read' }));
    expect(read.status).toBe(200);
    expect(read.body.runs.map((run: { run_id: string }) => run.run_id)).toEqual([first.body.run_id, second.body.run_id]);
    expect(read.body.messages.filter((message: { role: string }) => message.role === 'user').map((message: { content: string }) => message.content)).toEqual([
      'wait=300 one',
      'wait=10 two',
    ]);
    expect(read.body.messages.at(-1)).toMatchObject({ role: 'assistant', content: expect.stringMatching(/^done: /) });
    // The run's own conversation is what it appended to the thread, without the thread's earlier messages.
    const own = (await json(await call(`/v1/runs/${second.body.run_id}/messages`, { key: 'read' }))).body.messages as unknown[];
    expect(own[0]).toEqual({ role: 'user', content: 'wait=10 two' });
    expect(read.body.messages.slice(-own.length)).toEqual(own);
    expect((await json(await call('/v1/threads/bad%20id', { key: 'read' }))).status).toBe(400);
    expect((await call(`/v1/threads/${thread}`, { method: 'DELETE', key: 'read' })).status).toBe(403);
    expect(await json(await call(`/v1/threads/${thread}`, { method: 'DELETE', key: 'write' }))).toMatchObject({ status: 200, body: { thread_id: thread, deleted: true } });
    expect((await json(await call(`/v1/threads/${thread}`, { key: 'read' }))).status).toBe(404);
  });

  it('limits each key to ARCFLOW_API_RATE requests a second, with Retry-After', async () => {
    const limited = await spawnServe({ ...env, ARCFLOW_API_RATE: '5' });
    try {
      const statuses = [];
      let retryAfter: string | null = null;
      for (let index = 0; index < 8; index += 1) {
        const response = await fetch(`${limited.url}/v1/agents`, { headers: { authorization: `Bearer ${KEYS.read}` } });
        statuses.push(response.status);
        if (response.status === 429) {
          retryAfter = response.headers.get('retry-after');
          expect(await response.json()).toMatchObject({ status: 429, code: 'rate_limited' });
        }
      }
      expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
      expect(statuses.slice(5)).toEqual([429, 429, 429]);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      // Another key has its own budget.
      expect((await fetch(`${limited.url}/v1/agents`, { headers: { authorization: `Bearer ${KEYS.write}` } })).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });

  it('allows listed CORS origins only, and refuses to bind a public address without keys', async () => {
    const withCors = await spawnServe({ ...env, ARCFLOW_CORS_ORIGINS: 'https://console.example' });
    try {
      const allowed = await fetch(`${withCors.url}/v1/agents`, { headers: { authorization: `Bearer ${KEYS.read}`, origin: 'https://console.example' } });
      expect(allowed.headers.get('access-control-allow-origin')).toBe('https://console.example');
      const other = await fetch(`${withCors.url}/v1/agents`, { headers: { authorization: `Bearer ${KEYS.read}`, origin: 'https://other.example' } });
      expect(other.headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await withCors.stop();
    }
    await expect(spawnServe({ ...env, ARCFLOW_API_KEYS: '' }, ['--host', '0.0.0.0'])).rejects.toThrow(/refusing to serve on 0\.0\.0\.0 without API keys/);
    // A port in use: one line that says so and what to try, no stack.
    const port = new URL(serve.url).port;
    const busy = await run(process.execPath, [ARCFLOW_BIN, 'serve', '--port', port], { env: { ...process.env, ...env } }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );
    expect(busy).toMatchObject({ code: 1, stderr: `arcflow: cannot listen on 127.0.0.1:${port}: the port is in use (another process holds it); try another with --port N\n` });
    const open = await spawnServe({ ...env, ARCFLOW_API_KEYS: '' });
    try {
      expect(open.output()).toContain('no ARCFLOW_API_KEYS: loopback only');
      expect((await fetch(`${open.url}/v1/agents`)).status).toBe(200);
    } finally {
      await open.stop();
    }
  });
});

describe('arcflow serve: fork, retry and bulk actions (SPEC §15)', () => {
  const post = (path: string, body: unknown, key: keyof typeof KEYS = 'write') => call(path, { method: 'POST', body: JSON.stringify(body), key }).then(json);
  const finished = async (run_id: string) => {
    let record: Record<string, any> = {};
    for (let tries = 0; tries < 200 && !['completed', 'failed', 'cancelled'].includes(record.status); tries += 1) {
      record = (await json(await call(`/v1/runs/${run_id}`, { key: 'read' }))).body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return record;
  };

  it('forks (201 { run_id }, scope write), refuses bad forks (404, 400) and tokens-free scopes (403), and bulk needs admin', async () => {
    const source = await enqueue({ agent: 'api_agent', input: 'wait=10 forked' });
    expect(await finished(source.body.run_id)).toMatchObject({ status: 'completed', iterations: 3 });
    const forked = await post(`/v1/runs/${source.body.run_id}/fork`, { from: { iteration: 3 } });
    expect(forked).toMatchObject({ status: 201, body: { run_id: expect.any(String) } });
    expect(Object.keys(forked.body)).toEqual(['run_id']);
    // Rounds 1 and 2 replayed: only call 3 is made.
    expect(await finished(forked.body.run_id)).toMatchObject({
      status: 'completed',
      output: 'done: wait=10 forked',
      iterations: 1,
      forked_from: { run_id: source.body.run_id, step_id: 's1', iteration: 3 },
    });
    expect(await post('/v1/runs/run_unknown/fork', { from: { iteration: 1 } })).toMatchObject({ status: 404, body: { code: 'unknown_run' } });
    expect(await post(`/v1/runs/${source.body.run_id}/fork`, { from: { iteration: 4 } })).toMatchObject({
      status: 400,
      body: { code: 'invalid_request', detail: expect.stringContaining('from 1 to 3') },
    });
    expect(await post(`/v1/runs/${source.body.run_id}/fork`, { from: { step_id: 'nope', iteration: 1 } })).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect((await post(`/v1/runs/${source.body.run_id}/fork`, { from: { iteration: 1 } }, 'read')).status).toBe(403);
    expect((await post(`/v1/runs/${source.body.run_id}/fork`, { from: { iteration: 1 }, exec_config: { test: { steps: { s1: { output: 'x' } } } } })).status).toBe(403);
    // A completed run is not retried.
    expect(await post(`/v1/runs/${source.body.run_id}/retry`, {})).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    const bulk = { action: 'retry', filter: { status: 'failed', agent: 'api_agent' }, dry_run: true };
    expect((await post('/v1/runs/bulk', bulk, 'write')).status).toBe(403);
    expect(await post('/v1/runs/bulk', bulk, 'admin')).toMatchObject({ status: 200, body: { matched: expect.any(Number), acted: 0, run_ids: expect.any(Array) } });
    expect(await post('/v1/runs/bulk', { action: 'restart', filter: { status: 'failed' } }, 'admin')).toMatchObject({ status: 400 });
  });
});
