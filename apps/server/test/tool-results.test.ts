import { type TokenAction, createToken } from '@arcflow/core';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { type ServeProcess, spawnServe } from './harness.ts';

const FIXTURE = new URL('./fixtures/deferred-agents.ts', import.meta.url).pathname;
const prefix = testPrefix('tool-results-http');
const KEY = 'write-secret-0123456789';
const READ = 'read-secret-0123456789';
const TOKEN_SECRET = 'tool-results-token-secret-0123456789-abcd';
const env = {
  REDIS_URL: TEST_REDIS_URL,
  ARCFLOW_PREFIX: prefix,
  ARCFLOW_API_KEYS: `backend:${KEY}:write,viewer:${READ}:read`,
  ARCFLOW_API_RATE: '100000',
  ARCFLOW_TOKEN_SECRET: TOKEN_SECRET,
};
const redis = new Redis(TEST_REDIS_URL);
const processes: { stop(): Promise<unknown>; kill?(signal: NodeJS.Signals): void }[] = [];

afterAll(async () => {
  for (const each of processes) await each.stop().catch(() => undefined);
  await cleanupPrefix(prefix);
  await redis.quit();
});

const RUNS = 100;

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('results from outside through worker processes and arcflow serve', () => {
  it(`frees the slot of a deferred call: ${RUNS} runs of a concurrency-1 tool all wait; workers SIGKILLed while they wait; every run completes once answered over HTTP, each handler run once`, async () => {
    const serve: ServeProcess = await spawnServe(env);
    processes.push(serve);
    const spawn = () => spawnWorker(FIXTURE, { env: { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix } });
    const workers: WorkerProcess[] = await Promise.all([spawn(), spawn()]);
    processes.push(...workers);
    const call = (path: string, body?: unknown, key = KEY) =>
      fetch(`${serve.url}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }).then(async (response) => ({ status: response.status, body: (await response.json()) as Record<string, any> }));

    const run_ids: string[] = [];
    for (let index = 0; index < RUNS; index += 1) run_ids.push((await call('/v1/runs', { agent: 'payer', input: `order-${index}` })).body.run_id);
    const statuses = async () => Promise.all(run_ids.map(async (run_id) => (await redis.hget(`{${prefix}}:run:${run_id}`, 'status')) ?? 'gone'));
    await until(async () => (await statuses()).every((status) => status === 'waiting'), 120_000);
    const executions = async () => Number(await redis.get(`{${prefix}}:test:exec:start_payment`));
    expect(await executions()).toBe(RUNS);

    for (const worker of workers) worker.kill('SIGKILL');
    await Promise.all(workers.map((worker) => worker.exited));
    const fresh = await spawn();
    processes.push(fresh);

    const first = run_ids[0]!;
    const record = await call(`/v1/runs/${first}`, undefined, READ);
    expect(record.body.pending_tool_results).toEqual([expect.objectContaining({ tool_call_id: 'c_pay', tool_name: 'start_payment', arguments: { order: 'order-0' } })]);
    // Refusals: the output_schema names the path and records nothing; an id that does not wait is 409; an unknown run 404; read scope 403.
    const answer = (run_id: string, id: string, body: unknown, key = KEY) => call(`/v1/runs/${run_id}/tool-results/${id}`, body, key);
    expect(await answer(first, 'c_pay', { output: { receipt: 5 } })).toMatchObject({
      status: 400,
      body: { code: 'invalid_request', detail: expect.stringContaining('receipt: expected string') },
    });
    expect((await answer(first, 'c_pay', { output: 'x' }, READ)).status).toBe(403);
    expect((await answer(first, 'c_pay', { output: 'x', error: 'y' })).status).toBe(400);
    // An error must be text as sent (a number is not turned into one).
    expect(await answer(first, 'c_pay', { error: 5 })).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect(await answer(first, 'c_other', { output: { receipt: 'r' } })).toMatchObject({ status: 409, body: { code: 'not_waiting' } });
    expect(await answer('run_AAAAAAAAAAAAAAAAAAAAAA', 'c_pay', { output: { receipt: 'r' } })).toMatchObject({ status: 404, body: { code: 'unknown_run' } });
    // An end user's token (SPEC §19) answers with `respond` for its own run only.
    const token = (run_id: string, actions: TokenAction[]) => createToken({ secret: TOKEN_SECRET, run_id, actions });
    expect(await answer(first, 'c_pay', { output: { receipt: 'r' } }, await token(first, ['read']))).toMatchObject({ status: 403, body: { code: 'forbidden' } });
    expect(await answer(first, 'c_pay', { output: { receipt: 'r' } }, await token(run_ids[1]!, ['respond']))).toMatchObject({ status: 403, body: { code: 'forbidden' } });
    expect(await redis.hget(`{${prefix}}:run:${first}`, 'status')).toBe('waiting');

    const responder = await token(first, ['respond']);
    const answers = await Promise.all(run_ids.map((run_id, index) => answer(run_id, 'c_pay', { output: { receipt: `r-${index}` } }, index === 0 ? responder : KEY)));
    for (const each of answers) expect(each).toMatchObject({ status: 200, body: { status: 'completed', answered_at: expect.any(Number) } });
    // Answering twice returns the first answer.
    expect((await answer(first, 'c_pay', { error: 'late' })).body).toEqual(answers[0]!.body);

    await until(async () => (await statuses()).every((status) => status === 'completed'), 120_000);
    expect(await executions()).toBe(RUNS);
    const done = await call(`/v1/runs/${run_ids[7]}`, undefined, READ);
    expect(done.body).toMatchObject({ status: 'completed', output: 'paid: {"receipt":"r-7"}', state: { payment: 'started order-7' } });
    expect(done.body.pending_tool_results).toBeUndefined();
  }, 300_000);
});
