import { Agent, type TraceEvent, silentLogger, tool, toolDefinitionHash } from '@arcflow/core';
import { JobId, QueueName, RunStore, createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, assertEventInvariants, capturingLogger, reply, scriptedProvider, testPrefix, toolCall } from '@arcflow/testing';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { Dispatcher } from '../src/jobs/dispatcher.ts';
import { Watchdog } from '../src/watchdog/watchdog.ts';
import { WorkflowScheduler } from '../src/workflows/workflow-scheduler.ts';
import { Registry } from '../src/records/registry.ts';
import { ThreadStore } from '../src/threads/thread-store.ts';
import { FAST, collect, testResources, until } from './harness.ts';

const { prefixes, open, redis } = testResources();

const echo = tool({ name: 'wd_echo', description: 'echo', input_schema: { type: 'object' }, handler: () => 'echoed' });
const agent = new Agent({ name: 'watched', tools: [echo] });

/** A run stopped with its round open: a provider-only worker fanned the call out, and the tool job is waiting. */
async function runWithOpenRound(name: string, watchdog_ms = 600_000) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const logger = capturingLogger();
  const provider = scriptedProvider([toolCall('wd_echo', {}, 'c1'), reply('done')]);
  const providerWorker = await startWorker({ agents: [agent], provider, roles: ['provider'], redis: TEST_REDIS_URL, prefix, logger, ...FAST, watchdog_ms });
  open.push(providerWorker);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  const { run_id } = await client.enqueue({ agent: 'watched', input: 'go' });
  const tag = keysFor(prefix).tag;
  const toolQueue = new Queue(QueueName.tool('wd_echo', toolDefinitionHash(echo)), { connection: redis, prefix: tag });
  const providerQueue = new Queue(QueueName.agent('watched'), { connection: redis, prefix: tag });
  open.push(toolQueue, providerQueue);
  const toolJobId = JobId.tool(run_id, 's1', 1, 'c1');
  await until(async () => (await toolQueue.getJobState(toolJobId)) === 'prioritized');
  return { prefix, logger, client, run_id, toolQueue, providerQueue, toolJobId, provider, providerWorker };
}

describe('the watchdog', () => {
  it("re-adds a run's in-flight tool job deleted by hand, and the run completes", async () => {
    const { prefix, logger, client, run_id, toolQueue, toolJobId } = await runWithOpenRound('wd-repair', 400);
    await toolQueue.remove(toolJobId);
    expect(await toolQueue.getJobState(toolJobId)).toBe('unknown');
    const toolWorker = await startWorker({ agents: [agent], roles: ['tools'], redis: TEST_REDIS_URL, prefix, logger, ...FAST, watchdog_ms: 400 });
    open.push(toolWorker);
    const run = await client.wait(run_id, { timeout_ms: 10_000 });
    expect(run.status).toBe('completed');
    expect(run.output).toBe('done');
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(events.filter((event) => event.kind === 'ToolCallCompleted')).toHaveLength(1);
    expect(logger.lines.some((line) => line.startsWith('watchdog re-added the next job'))).toBe(true);
  });

  it('re-adds a provider job deleted before any worker took it', async () => {
    const prefix = testPrefix('wd-provider');
    prefixes.push(prefix);
    const startWatched = () =>
      startWorker({
        agents: [agent],
        provider: scriptedProvider([reply('hello')], { repeat: true }),
        redis: TEST_REDIS_URL,
        prefix,
        logger: silentLogger,
        ...FAST,
        watchdog_ms: 400,
      });
    // Registers the agent, then goes away: the run waits in its queue.
    const first = await startWatched();
    await first.close();
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'watched', input: 'go' });
    const providerQueue = new Queue(QueueName.agent('watched'), { connection: redis, prefix: keysFor(prefix).tag });
    open.push(providerQueue);
    expect(await providerQueue.remove(JobId.provider(run_id, 's1', 1))).toBe(1);
    const worker = await startWatched();
    open.push(worker);
    const run = await client.wait(run_id, { timeout_ms: 10_000 });
    expect(run).toMatchObject({ status: 'completed', output: 'hello' });
  });

  it('leaves a run alone while a job that can move it is queued, however long it waits', async () => {
    const { prefix, run_id, toolQueue, toolJobId } = await runWithOpenRound('wd-queued');
    const watchdog = standaloneWatchdog(prefix);
    const { nowMs } = await watchdog.store.watchdog.staleRuns(0, 10);
    expect(await watchdog.dog.check(run_id, nowMs)).toBe('moving');
    expect(await toolQueue.getJobState(toolJobId)).toBe('prioritized');
  });

  it('fails a run it cannot move with `stalled` after its repairs, closing its open call once', async () => {
    const { prefix, client, run_id, toolQueue, providerQueue, toolJobId, providerWorker } = await runWithOpenRound('wd-stalled');
    await providerWorker.close();
    const watchdog = standaloneWatchdog(prefix);
    const verdicts: string[] = [];
    for (let round = 0; round < 4; round += 1) {
      // The jobs that could move the run keep disappearing.
      await toolQueue.remove(toolJobId);
      for (const n of [1, 2]) await providerQueue.remove(JobId.provider(run_id, 's1', n));
      const { nowMs } = await watchdog.store.watchdog.staleRuns(0, 10);
      verdicts.push(await watchdog.dog.check(run_id, nowMs));
    }
    expect(verdicts).toEqual(['repaired', 'repaired', 'repaired', 'failed']);
    const run = await client.get(run_id);
    expect(run).toMatchObject({ status: 'failed', error: { code: 'RunStalled', error_code: 'stalled' } });
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(events.slice(-3).map((event) => [event.kind, (event as { error_code?: string }).error_code])).toEqual([
      ['ToolCallFailed', 'worker_lost'],
      ['StepExecutionFailed', 'stalled'],
      ['RunFailed', 'stalled'],
    ]);
    // An ended run leaves the active set: nothing more to watch.
    expect(await redis.zscore(keysFor(prefix).activeRunsIn(keysFor(prefix).tag), run_id)).toBeNull();
  });

  it('fails at once a run whose agent no worker has ever registered', async () => {
    const { prefix, client, run_id, providerWorker } = await runWithOpenRound('wd-unregistered');
    await providerWorker.close();
    await redis.del(keysFor(prefix).agent('watched'));
    const watchdog = standaloneWatchdog(prefix);
    const { nowMs } = await watchdog.store.watchdog.staleRuns(0, 10);
    expect(await watchdog.dog.check(run_id, nowMs)).toBe('failed');
    const run = await client.get(run_id);
    expect(run?.error?.message).toMatch(/no worker has registered agent 'watched'/);
    const events: TraceEvent[] = await collect(client, run_id);
    assertEventInvariants(events);
  });

  it("leaves a run waiting in its thread's line alone, and starts it at once when the run before it is failed", async () => {
    const prefix = testPrefix('wd-thread');
    prefixes.push(prefix);
    // Registers the agent, then goes away: the thread's runs wait in their queue.
    await (await startWorker({ agents: [agent], provider: scriptedProvider([reply('x')]), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST })).close();
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const first = await client.enqueue({ agent: 'watched', input: 'one', thread_id: 'wd' });
    const second = await client.enqueue({ agent: 'watched', input: 'two', thread_id: 'wd' });
    const providerQueue = new Queue(QueueName.agent('watched'), { connection: redis, prefix: keysFor(prefix).tag });
    open.push(providerQueue);
    const secondJob = JobId.provider(second.run_id, 's1', 1);
    // Waiting in its thread's line, it holds no job, and the watchdog leaves it alone.
    expect(await providerQueue.getJobState(secondJob)).toBe('unknown');
    await redis.del(keysFor(prefix).agent('watched'));
    const watchdog = standaloneWatchdog(prefix);
    const { nowMs } = await watchdog.store.watchdog.staleRuns(0, 10);
    for (let scan = 0; scan < 5; scan++) expect(await watchdog.dog.check(second.run_id, nowMs)).toBe('moving');
    expect(await watchdog.dog.check(first.run_id, nowMs)).toBe('failed');
    expect(await providerQueue.getJobState(secondJob)).toBe('prioritized');
  });

  it("re-adds a provider job with the attempts of the run's own model_fallbacks, as its enqueue gave it", async () => {
    const prefix = testPrefix('wd-fallbacks');
    prefixes.push(prefix);
    await (await startWorker({ agents: [agent], provider: scriptedProvider([reply('x')]), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST })).close();
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'watched', input: 'go', config: { model_fallbacks: [{ model: 'm2' }, { model: 'm3' }] } });
    const providerQueue = new Queue(QueueName.agent('watched'), { connection: redis, prefix: keysFor(prefix).tag });
    open.push(providerQueue);
    const jobId = JobId.provider(run_id, 's1', 1);
    const enqueued = (await providerQueue.getJob(jobId))!.opts.attempts;
    expect(await providerQueue.remove(jobId)).toBe(1);
    const watchdog = standaloneWatchdog(prefix);
    const { nowMs } = await watchdog.store.watchdog.staleRuns(0, 10);
    expect(await watchdog.dog.check(run_id, nowMs)).toBe('repaired');
    expect((await providerQueue.getJob(jobId))!.opts.attempts).toBe(enqueued);
  });

  it('starts the next run of a thread whose run ended in a process that died before starting it', async () => {
    const prefix = testPrefix('wd-thread-gap');
    prefixes.push(prefix);
    await (await startWorker({ agents: [agent], provider: scriptedProvider([reply('x')]), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST })).close();
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const first = await client.enqueue({ agent: 'watched', input: 'one', thread_id: 'gap' });
    const second = await client.enqueue({ agent: 'watched', input: 'two', thread_id: 'gap' });
    const providerQueue = new Queue(QueueName.agent('watched'), { connection: redis, prefix: keysFor(prefix).tag });
    open.push(providerQueue);
    const watchdog = standaloneWatchdog(prefix);
    // The write that ends the first run makes the second active; the process that made it dies before adding its job.
    expect((await watchdog.store.finishRun(first.run_id, { outcome: { status: 'cancelled' }, step_id: 's1' })).ended).toBe(true);
    const secondJob = JobId.provider(second.run_id, 's1', 1);
    expect(await providerQueue.getJobState(secondJob)).toBe('unknown');
    const { nowMs } = await watchdog.store.watchdog.staleRuns(0, 10);
    expect(await watchdog.dog.check(second.run_id, nowMs)).toBe('repaired');
    expect(await providerQueue.getJobState(secondJob)).toBe('prioritized');
  });
});

describe('the watchdog keeping the listing indexes', () => {
  it("trims entries older than the retention period from the global and the agents' indexes", async () => {
    const prefix = testPrefix('wd-trim');
    prefixes.push(prefix);
    const keys = keysFor(prefix);
    await redis.sadd(keys.agentNames, 'watched');
    const now = Date.now();
    for (const index of [keys.runsIndexIn(keys.tag), keys.runsIndexIn(keys.tag, 'watched')]) {
      await redis.zadd(index, now - 3 * 86_400_000, 'run_old', now, 'run_new');
    }
    // The standalone store keeps runs 60 s: entries older than that and a day go.
    await standaloneWatchdog(prefix).dog.scanOnce();
    for (const index of [keys.runsIndexIn(keys.tag), keys.runsIndexIn(keys.tag, 'watched')]) {
      expect(await redis.zrange(index, 0, -1)).toEqual(['run_new']);
    }
  });
});

function standaloneWatchdog(prefix: string) {
  const store = new RunStore(redis, prefix, 60);
  const queues = new Dispatcher(redis, store.keys);
  open.push(queues);
  const scheduler = new WorkflowScheduler({ store, queues, redis, logger: silentLogger });
  const threads = new ThreadStore(redis, store.keys, prefix, store.partitions);
  const dog = new Watchdog({
    store,
    redis,
    queues,
    threads,
    registry: new Registry(redis, store.keys, 20_000),
    scheduler,
    logger: silentLogger,
    worker_id: 'test',
    watchdog_ms: 1,
  });
  return { store, dog };
}
