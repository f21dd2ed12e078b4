import { Agent, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, reply, scriptedProvider, testPrefix } from '@arcflow/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FAST } from './harness.ts';

const prefix = testPrefix('enqueued-by');
const worker = await startWorker({
  agents: [new Agent({ name: 'greeter' })],
  provider: scriptedProvider([reply('hello')], { repeat: true }),
  redis: TEST_REDIS_URL,
  prefix,
  logger: silentLogger,
  ...FAST,
});
const client = createClient({ redis: TEST_REDIS_URL, prefix });

afterAll(async () => {
  await client.close();
  await worker.close();
  await cleanupPrefix(prefix);
});

describe('enqueued_by: who enqueued a run, on its record (SPEC §19)', () => {
  it('is kept on the record that get and list read, through the run and after it ends; absent when not given', async () => {
    const { run_id } = await client.enqueue({ agent: 'greeter', input: 'hi', thread_id: 'user-7', enqueued_by: 'token:user-7' });
    expect(await client.get(run_id)).toMatchObject({ run_id, thread_id: 'user-7', enqueued_by: 'token:user-7' });
    expect(await client.wait(run_id, { timeout_ms: 10_000 })).toMatchObject({ status: 'completed', output: 'hello', enqueued_by: 'token:user-7' });
    expect((await client.list({ agent: 'greeter' })).runs.find((run) => run.run_id === run_id)).toMatchObject({ enqueued_by: 'token:user-7' });
    const plain = await client.enqueue({ agent: 'greeter', input: 'hi' });
    expect(await client.get(plain.run_id)).not.toHaveProperty('enqueued_by');
  });

  it('is 1-200 characters without control characters', async () => {
    for (const enqueued_by of ['', 'x'.repeat(201), 'token:a\nb', 7]) {
      await expect(client.enqueue({ agent: 'greeter', input: 'hi', enqueued_by } as never)).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringContaining('enqueued_by must be 1-200 characters'),
      });
    }
    const { run_id } = await client.enqueue({ agent: 'greeter', input: 'hi', enqueued_by: 'token:josé' });
    expect((await client.get(run_id))?.enqueued_by).toBe('token:josé');
  });
});
