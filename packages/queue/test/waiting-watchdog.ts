// Measures how long the watchdog takes to repair a run that is really stuck beside many runs that
// wait for results from outside (SPEC §20): used by watchdog-waiting.test.ts and by the bench.
import { Agent, type ModelProvider, silentLogger, tool, toolDefinitionHash } from '@arcflow/core';
import { JobId, QueueName, createClient, keysFor, startWorker } from '@arcflow/queue';
import { reply, toolCall } from '@arcflow/testing';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RUN_KEY_SUFFIX } from '../src/redis/keys.ts';

const browser = tool({ name: 'ww_location', description: "the user's location, from the browser", input_schema: { type: 'object' } });
const work = tool({ name: 'ww_work', description: 'does some work', input_schema: { type: 'object' }, handler: () => 'worked' });
const agent = new Agent({ name: 'ww_agent', tools: [browser, work] });

/** Copies a waiting run's keys (record, rounds, waiting calls) and its place in the active set `count` times: what the engine writes for each. */
export async function cloneWaitingRun(redis: Redis, prefix: string, run_id: string, count: number): Promise<string[]> {
  const keys = keysFor(prefix);
  const record = keys.record(run_id);
  const active = keys.activeRunsIn(keys.tagOf(run_id));
  const score = await redis.zscore(active, run_id);
  const suffixes = ['', RUN_KEY_SUFFIX.pending, RUN_KEY_SUFFIX.toolResults];
  const dumps = await Promise.all(suffixes.map((suffix) => redis.dumpBuffer(record + suffix)));
  const ids: string[] = [];
  for (let from = 0; from < count; from += 1_000) {
    const pipeline = redis.pipeline();
    for (let index = from; index < Math.min(count, from + 1_000); index += 1) {
      const id = `${run_id}w${index}`;
      ids.push(id);
      for (const [at, suffix] of suffixes.entries()) pipeline.restore(keys.record(id) + suffix, 0, dumps[at]!, 'REPLACE');
      pipeline.zadd(active, score!, id);
    }
    await pipeline.exec();
  }
  return ids;
}

/**
 * With `waiting` runs waiting on a browser tool (one made by the engine, the rest its copies), a
 * run whose tool job was deleted by hand: ms from the deletion until the watchdog has added the job
 * again, with `watchdog_ms` as the watchdog's period. Also returns the waiting run's score in the
 * active set against its call's `expires_at` (equal: off the scan until then).
 */
export async function repairBesideWaiting(
  redis: Redis,
  url: string,
  prefix: string,
  waiting: number,
  watchdog_ms: number,
): Promise<{ repairMs: number; parkedScore: number; expiresAt: number }> {
  // `browser`: one call of the browser tool; `work`: one call of a worker tool; then text.
  const model: ModelProvider = {
    id: 'ww',
    defaultModel: 'ww-model',
    async complete(request) {
      if (request.messages.some((message) => message.role === 'tool')) return reply('done');
      const input = String(request.messages.find((message) => message.role === 'user')?.content ?? '');
      return input === 'browser' ? toolCall('ww_location', {}, 'c_loc') : toolCall('ww_work', {}, 'c_work');
    },
  };
  // Provider jobs only (watchdog off): the stuck run's tool job stays queued for the hand that deletes it.
  const providerWorker = await startWorker({ agents: [agent], provider: model, roles: ['provider'], redis: url, prefix, logger: silentLogger, watchdog_ms: 3_600_000 });
  const client = createClient({ redis: url, prefix });
  const tag = keysFor(prefix).tag;
  const toolQueue = new Queue(QueueName.tool('ww_work', toolDefinitionHash(work)), { connection: redis, prefix: tag });
  try {
    const waitingRun = await client.enqueue({ agent: 'ww_agent', input: 'browser' });
    while ((await client.get(waitingRun.run_id))?.status !== 'waiting') await new Promise((resolve) => setTimeout(resolve, 20));
    const expiresAt = (await client.get(waitingRun.run_id))!.pending_tool_results![0]!.expires_at;
    const parkedScore = Number(await redis.zscore(keysFor(prefix).activeRunsIn(keysFor(prefix).tagOf(waitingRun.run_id)), waitingRun.run_id));
    await cloneWaitingRun(redis, prefix, waitingRun.run_id, waiting - 1);
    const stuck = await client.enqueue({ agent: 'ww_agent', input: 'work' });
    const jobId = JobId.tool(stuck.run_id, 's1', 1, 'c_work');
    // Queued: 'prioritized' as every job carries its tenant's fair priority (SPEC §14).
    while (!['waiting', 'prioritized'].includes(await toolQueue.getJobState(jobId))) await new Promise((resolve) => setTimeout(resolve, 10));
    await toolQueue.remove(jobId);
    const deletedAt = performance.now();
    await providerWorker.close();
    // The watchdog of a worker started now, with the short period.
    const watching = await startWorker({ agents: [agent], provider: model, roles: ['provider'], redis: url, prefix, logger: silentLogger, watchdog_ms });
    try {
      while ((await toolQueue.getJobState(jobId)) === 'unknown') await new Promise((resolve) => setTimeout(resolve, 20));
      return { repairMs: performance.now() - deletedAt, parkedScore, expiresAt };
    } finally {
      await watching.close();
    }
  } finally {
    await toolQueue.close();
    await client.close();
    await providerWorker.close();
  }
}
