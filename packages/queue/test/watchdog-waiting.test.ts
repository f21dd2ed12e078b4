import { Agent, type ModelProvider, agentTool, childRunId, silentLogger, tool } from '@arcflow/core';
import { createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, reply, testPrefix, toolCall } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { FAST, testResources, until } from './harness.ts';
import { repairBesideWaiting } from './waiting-watchdog.ts';

const { prefixes, open, redis } = testResources();

describe('the watchdog beside runs that wait outside (SPEC §20)', () => {
  it('repairs a run whose job was deleted by hand within 2 × ARCFLOW_WATCHDOG_MS beside 10,000 runs waiting on browser tools, none of which it scans', async () => {
    const prefix = testPrefix('wd-waiting');
    prefixes.push(prefix);
    const watchdog_ms = 1_000;
    const { repairMs, parkedScore, expiresAt } = await repairBesideWaiting(redis, TEST_REDIS_URL, prefix, 10_000, watchdog_ms);
    // A waiting run is off the scan until its call's timeout is due.
    expect(parkedScore).toBe(expiresAt);
    expect(repairMs).toBeLessThan(2 * watchdog_ms);
  }, 120_000);
});

describe('a run waiting for a child run', () => {
  it('is off the scan while its only open call waits for its child, and back once the child settles it; the ended child leaves the scan', async () => {
    const prefix = testPrefix('wd-child');
    prefixes.push(prefix);
    const ask = tool({ name: 'wdc_ask', description: 'asks the browser', input_schema: { type: 'object' } });
    const helper = new Agent({ name: 'wdc_helper', tools: [ask] });
    const parent = new Agent({ name: 'wdc_parent', tools: [agentTool(helper, { name: 'wdc_delegate' })] });
    const provider: ModelProvider = {
      id: 'wdc',
      defaultModel: 'm',
      async complete(request) {
        if (request.messages.some((message) => message.role === 'tool')) return reply('done');
        return request.tools.some((spec) => spec.name === 'wdc_ask') ? toolCall('wdc_ask', {}, 'c_ask') : toolCall('wdc_delegate', { input: 'go' }, 'c_child');
      },
    };
    const worker = await startWorker({ agents: [parent, helper], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'wdc_parent', input: 'delegate' });
    const keys = keysFor(prefix);
    const score = (id: string) => redis.zscore(keys.activeRunsIn(keys.tagOf(id)), id);
    const child_run_id = childRunId(run_id, 's1', 1, 'c_child');
    await until(async () => (await client.get(child_run_id))?.status === 'waiting');
    await until(async () => (await score(run_id)) === 'inf');
    expect(Number(await score(child_run_id))).toBe((await client.get(child_run_id))!.pending_tool_results![0]!.expires_at);
    await client.submitToolResult(child_run_id, 'c_ask', { output: 'here' });
    expect((await client.wait(run_id, { timeout_ms: 10_000 })).output).toBe('done');
    expect(await score(child_run_id)).toBeNull();
    expect(await score(run_id)).toBeNull();
  });
});
