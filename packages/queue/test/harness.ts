import { type Agent, type ModelProvider, type TraceEvent, type Workflow, silentLogger } from '@arcflow/core';
import { type ArcflowClient, type WorkerOptions, createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, scriptedProvider } from '@arcflow/testing';
import type { ScenarioRunner } from '@arcflow/testing/scenarios';
import { Redis } from 'ioredis';
import { afterAll, afterEach } from 'vitest';

/** Fast retry and stall settings for tests. */
export const FAST = { provider_backoff_ms: 10, tool_backoff_ms: 10, lock_duration_ms: 2_000, stalled_interval_ms: 1_000 } as const;

export async function collect(client: ArcflowClient, run_id: string): Promise<TraceEvent[]> {
  const events: TraceEvent[] = [];
  for await (const event of client.events(run_id)) events.push(event);
  return events;
}

/** A scenario runner on the queue engine: fresh in-process workers (one unless told) and a client per run, under `prefix`. */
export function engineRunner(prefixFor: () => string, extra: Partial<WorkerOptions> = {}, workers = 1): ScenarioRunner {
  return async (agent: Agent | Workflow, input, { provider, exec_config, config, logger }) => {
    const prefix = prefixFor();
    const started = await Promise.all(
      Array.from({ length: workers }, () =>
        startWorker({
          agents: [agent],
          provider: provider ?? (scriptedProvider([]) as ModelProvider),
          redis: TEST_REDIS_URL,
          prefix,
          logger: logger ?? silentLogger,
          ...FAST,
          ...extra,
        }),
      ),
    );
    const worker = { close: () => Promise.all(started.map((each) => each.close())) };
    const client = createClient({ redis: extra.redis ?? TEST_REDIS_URL, prefix });
    try {
      const { run_id } = await client.enqueue({ agent: agent.name, input, config, exec_config });
      const run = await client.wait(run_id, { timeout_ms: 20_000 });
      return { ...run, events: await collect(client, run_id) };
    } finally {
      await client.close();
      await worker.close();
    }
  };
}

/** Polls `check` until it holds; throws after `timeoutMs`. */
export async function until(check: () => Promise<boolean>, timeoutMs = 10_000, pollMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/**
 * What a test file opens and must clean up: its key prefixes (deleted after the file), things to
 * close after each test (in reverse order), and one Redis connection for looking underneath.
 */
export function testResources(): { prefixes: string[]; open: { close(): Promise<void> }[]; redis: Redis } {
  const prefixes: string[] = [];
  const open: { close(): Promise<void> }[] = [];
  const redis = new Redis(TEST_REDIS_URL);
  afterEach(async () => {
    for (const item of open.splice(0).reverse()) await item.close();
  });
  afterAll(async () => {
    for (const prefix of prefixes) await cleanupPrefix(prefix);
    await redis.quit();
  });
  return { prefixes, open, redis };
}
