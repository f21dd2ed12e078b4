import { createClient } from '@arcflow/queue';
import { type FakeRequest, type FakeTurn, startFakeOpenAI, testCluster } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixtureWorkers } from './harness.ts';

// SPEC §11 threads on a 3-master Redis Cluster with 4 partitions (SPEC §9): a thread's keys share the
// hash tag of its runs' partition, so the scripts that end its runs reach it in one slot.

const FIXTURE = new URL('./fixtures/thread-agents.ts', import.meta.url).pathname;
let cluster: Awaited<ReturnType<typeof testCluster>> | undefined;
beforeAll(async () => {
  cluster = await testCluster(3);
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});
const { forTest } = fixtureWorkers(FIXTURE, () => cluster!.url);

function answer(request: FakeRequest): FakeTurn {
  const last = request.body.messages.at(-1) as { role: string; content: string };
  if (last.role === 'tool') return { type: 'text', content: `after ${last.content}` };
  if (last.content.startsWith('tool:')) return { type: 'tools', calls: [{ name: 'lookup', arguments: { word: last.content.slice(5) } }] };
  return { type: 'text', content: `re: ${last.content}` };
}

describe('threads on a Redis Cluster with partitions', () => {
  it('queues runs of a thread one at a time and appends each, in enqueue order', async () => {
    const fake = await startFakeOpenAI({ fallback: answer });
    const workers = forTest('thread-cluster');
    await workers.start({ env: { FAKE_URL: fake.url, ARCFLOW_PARTITIONS: '4' } });
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    const inputs = ['hello', 'tool:fig', 'bye'];
    const runs = [];
    for (const input of inputs) runs.push(await client.enqueue({ agent: 'chat', input, thread_id: 'cluster:t' }));
    for (const { run_id } of runs) expect((await client.wait(run_id, { timeout_ms: 30_000 })).status).toBe('completed');
    const thread = client.thread('cluster:t');
    expect((await thread.runs()).map((run) => run.run_id)).toEqual(runs.map(({ run_id }) => run_id));
    const partitions = new Set((await thread.runs()).map((run) => run.partition));
    expect(partitions.size).toBe(1);
    // Minted in a partition (the map has 4): the thread lives under that partition's tag.
    expect(runs.every(({ run_id }) => /^run_p\d+_/.test(run_id))).toBe(true);
    expect((await thread.messages()).map((message) => message.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'tool', 'assistant', 'user', 'assistant']);
    expect(fake.requests.at(-1)!.body.messages).toHaveLength(1 + 6 + 1);
    await client.close();
    await fake.close();
  }, 50_000);
});
