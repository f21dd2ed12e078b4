import { Agent, silentLogger, tool, toolDefinitionHash } from '@arcflow/core';
import { QueueName, RunStore, createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, reply, scriptedProvider, testPrefix, toolCall } from '@arcflow/testing';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { collect, until } from './harness.ts';

// A run's end closes its open calls; removing their queued tool jobs is a later step of the same
// process. A job left queued (that process died in between) must not run its handler.

describe('a tool job still queued when its run ended (the process that ended it died before removing it)', () => {
  it('is taken without running its handler: its call stays closed as the end closed it', async () => {
    const prefix = testPrefix('cancel-left-job');
    const redis = new Redis(TEST_REDIS_URL);
    const ran: string[] = [];
    const effect = tool({ name: 'side_effect', description: 'has one', input_schema: { type: 'object' }, handler: () => (ran.push('ran'), 'done') });
    const agent = new Agent({ name: 'left_job', tools: [effect] });
    const provider = scriptedProvider([toolCall('side_effect', {}, 'e1'), reply('over')]);
    // Only the provider role: the call's tool job waits in its queue.
    const planner = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, roles: ['provider'] });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    const queue = new Queue(QueueName.tool('side_effect', toolDefinitionHash(effect)), { connection: redis, prefix: keysFor(prefix).tag });
    let runner: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      const { run_id } = await client.enqueue({ agent: 'left_job', input: 'go' });
      await until(async () => (await queue.getWaitingCount()) + (await queue.getPrioritizedCount()) === 1);
      // The cancel's write, without its removal of the queued job.
      const store = new RunStore(redis, prefix, 60);
      expect((await store.finishRun(run_id, { outcome: { status: 'cancelled' }, step_id: 's1' })).ended).toBe(true);
      runner = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, roles: ['tools'] });
      await until(async () => (await queue.getCompletedCount()) === 1);
      expect(ran).toEqual([]);
      const events = await collect(client, run_id);
      expect(events.filter((event) => event.kind === 'ToolCallStarted')).toEqual([]);
      expect(events.filter((event) => event.kind === 'ToolCallFailed')).toEqual([expect.objectContaining({ tool_call_id: 'e1', error_code: 'cancelled' })]);
    } finally {
      await runner?.close();
      await queue.close();
      await client.close();
      await planner.close();
      await cleanupPrefix(prefix);
      await redis.quit();
    }
  });
});
