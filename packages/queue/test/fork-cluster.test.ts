import { createClient } from '@arcflow/queue';
import { type FakeRequest, type FakeTurn, startFakeOpenAI } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { fileCluster, fixtureWorkers } from './harness.ts';

// SPEC §15 on a 3-master Redis Cluster with 8 partitions (SPEC §9): a fork is minted in its source's
// partition, so a retry marks its source in the write that creates it, and a branched thread lives
// under the same tag as the fork's runs.

const FIXTURE = new URL('./fixtures/fork-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE, fileCluster());

/** `fail` is a 400 while `failing`; anything else `re: <it>`. */
function fakeModel(failing: { on: boolean }) {
  return (request: FakeRequest): FakeTurn => {
    const last = request.body.messages.at(-1) as { content: string };
    if (last.content === 'fail' && failing.on) return { type: 'status', status: 400, body: { error: { message: 'down' } } };
    return { type: 'text', content: `re: ${last.content}` };
  };
}

describe('fork and retry on a Redis Cluster with partitions', () => {
  it('retries a thread run once, on a branch of its thread in its partition', async () => {
    const failing = { on: true };
    const fake = await startFakeOpenAI({ fallback: fakeModel(failing) });
    const workers = forTest('fork-cluster');
    await workers.start({ env: { FAKE_URL: fake.url, ARCFLOW_PARTITIONS: '8' } });
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const first = await client.enqueue({ agent: 'stepper', input: 'hello', thread_id: 'cluster:t' });
      expect((await client.wait(first.run_id, { timeout_ms: 30_000 })).status).toBe('completed');
      const second = await client.enqueue({ agent: 'stepper', input: 'fail', thread_id: 'cluster:t' });
      expect((await client.wait(second.run_id, { timeout_ms: 30_000 })).status).toBe('failed');
      failing.on = false;
      const retried = await client.retry(second.run_id);
      const run = await client.wait(retried.run_id, { timeout_ms: 30_000 });
      expect(run).toMatchObject({ status: 'completed', output: 're: fail', thread_id: retried.thread_id, partition: (await client.get(second.run_id))!.partition });
      expect(await client.retry(second.run_id)).toEqual(retried);
      expect((await client.get(second.run_id))!.retried_by).toBe(retried.run_id);
      expect((await client.thread(retried.thread_id!).messages()).map((message) => message.content)).toEqual(['hello', 're: hello', 'fail', 're: fail']);
      expect((await client.thread('cluster:t').messages()).map((message) => message.content)).toEqual(['hello', 're: hello']);
    } finally {
      await client.close();
      await fake.close();
    }
  }, 90_000);
});
