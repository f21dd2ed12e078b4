import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Agent, RequestError, type RunRecord, Workflow, silentLogger, tool, toolDefinitionHash } from '@arcflow/core';
import { Queue } from 'bullmq';
import { QueueName, createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, reply, scriptedProvider, testPrefix, toolCalls } from '@arcflow/testing';
import { type WaitingScenarioRunner, defineToolResultScenarios } from '@arcflow/testing/scenarios';
import { ARCFLOW_BIN } from '@arcflow/worker';
import { describe, expect, it } from 'vitest';
import { FAST, collect, engineRunner, testResources, until } from './harness.ts';

const { prefixes, open, redis } = testResources();
const nextPrefix = (name: string) => {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  return prefix;
};

/**
 * The queue engine, answering as a person or a browser would: the run's record is read every
 * 25 ms, and each call it lists as waiting is answered through the client (a refused result is
 * asked for again on the next read).
 */
const engine: WaitingScenarioRunner = async (agent, input, { provider, toolResult, approve, cancelWhenWaiting }) => {
  const prefix = nextPrefix('tool-results');
  const worker = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  try {
    const { run_id } = await client.enqueue({ agent: agent.name, input });
    const asked = new Set<string>();
    let record: RunRecord;
    for (;;) {
      record = (await client.get(run_id))!;
      if (record.status === 'completed' || record.status === 'failed' || record.status === 'cancelled') break;
      for (const request of record.pending_approvals ?? []) {
        if (asked.has(`approval:${request.tool_call_id}`) || !approve) continue;
        asked.add(`approval:${request.tool_call_id}`);
        await client.approve(run_id, request.tool_call_id, await approve(askedOf(request)));
      }
      for (const request of record.pending_tool_results ?? []) {
        const key = `result:${request.tool_call_id}`;
        if (asked.has(key)) continue;
        asked.add(key);
        if (cancelWhenWaiting) {
          await client.cancel(run_id);
          continue;
        }
        if (!toolResult) continue;
        void Promise.resolve(toolResult(askedOf(request)))
          .then((answer) => client.submitToolResult(run_id, request.tool_call_id, answer))
          .catch((error: unknown) => {
            if (error instanceof RequestError && error.code === 'invalid_request') asked.delete(key);
          });
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    return { ...record, events: await collect(client, run_id) };
  } finally {
    await client.close();
    await worker.close();
  }
};

/** What `runLocal` gives its `approve` and `toolResult`: the request without its times. */
function askedOf({ step_id, iteration, tool_call_id, tool_name, arguments: args }: NonNullable<RunRecord['pending_tool_results']>[number]) {
  return { step_id, iteration, tool_call_id, tool_name, arguments: args };
}

defineToolResultScenarios('queue engine', engine);

const locate = (extra: Record<string, unknown> = {}) =>
  tool({ name: 'get_location', description: 'From the browser', input_schema: { type: 'object' }, max_result_bytes: 64, ...extra });

describe('results from outside on the queue engine', () => {
  it('lists the waiting call, answers once (a second answer returns the first), cuts the output, and refuses calls that do not wait', async () => {
    const prefix = nextPrefix('tool-results-answer');
    const agent = new Agent({ name: 'browser-agent', tools: [locate({ output_schema: { type: 'object', properties: { text: { type: 'string' } } } })] });
    const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: { why: 'x' }, id: 'call_loc' }]), reply('done')]);
    const worker = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'browser-agent', input: 'Where?' });
    await until(async () => (await client.get(run_id))!.status === 'waiting');
    const record = (await client.get(run_id))!;
    expect(record.pending_tool_results).toEqual([
      {
        step_id: 's1',
        iteration: 1,
        tool_call_id: 'call_loc',
        tool_name: 'get_location',
        arguments: { why: 'x' },
        requested_at: expect.any(Number),
        expires_at: expect.any(Number),
      },
    ]);
    const refuse = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: RequestError) => [error.code, error.message],
      );
    expect(await refuse(client.submitToolResult(run_id, 'call_loc', { output: { text: 5 } }))).toEqual([
      'invalid_request',
      "output does not match the output_schema of tool 'get_location': text: expected string",
    ]);
    expect((await client.get(run_id))!.status).toBe('waiting');
    expect(await refuse(client.submitToolResult(run_id, 'call_other', { output: 'x' }))).toEqual(['not_waiting', expect.stringContaining("tool call 'call_other'")]);
    expect((await refuse(client.submitToolResult('r-unknown-run', 'call_loc', { output: 'x' })))?.[0]).toBe('unknown_run');
    expect((await refuse(client.submitToolResult(run_id, 'call_loc', { output: 'x', error: 'y' } as never)))?.[0]).toBe('invalid_request');
    const first = await client.submitToolResult(run_id, 'call_loc', { output: { text: 'y'.repeat(200) } });
    expect(first).toEqual({ status: 'completed', answered_at: expect.any(Number) });
    expect(await client.submitToolResult(run_id, 'call_loc', { error: 'too late' })).toEqual(first);
    // A second answer that the output_schema would refuse returns the first too: it changes nothing.
    expect(await client.submitToolResult(run_id, 'call_loc', { output: { text: 5 } })).toEqual(first);
    const done = await client.wait(run_id, { timeout_ms: 10_000 });
    expect(await client.submitToolResult(run_id, 'call_loc', { output: { text: 5 } })).toEqual(first);
    expect(done.status).toBe('completed');
    // An external tool's calls never run on a worker: no worker serves its queue.
    const toolQueue = new Queue(QueueName.tool('get_location', toolDefinitionHash(agent.tools[0]!)), { connection: redis, prefix: keysFor(prefix).tag });
    expect(await toolQueue.getWorkersCount()).toBe(0);
    await toolQueue.close();
    const content = provider.requests[1]!.messages.at(-1)!.content as string;
    expect(content).toMatch(/^\{"text":"y+\n\[result truncated: \d+ of 211 bytes cut\]$/);
    const events = await collect(client, run_id);
    expect(events.filter((event) => event.kind === 'ToolCallCompleted')).toHaveLength(1);
    expect(JSON.stringify(events)).not.toContain('yyyy');
  });

  it('times a call out within 5 s of expires_at from another worker, after the one that saw the request has closed', async () => {
    const prefix = nextPrefix('tool-results-timeout');
    const agent = new Agent({ name: 'browser-agent', tools: [locate({ result_timeout_ms: 1_500 })] });
    const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {}, id: 'call_loc' }]), reply('no location')]);
    const first = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'browser-agent', input: 'Where?' });
    await until(async () => (await client.get(run_id))!.status === 'waiting');
    const expires_at = (await client.get(run_id))!.pending_tool_results![0]!.expires_at;
    await first.close();
    const second = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    open.push(second);
    const done = await client.wait(run_id, { timeout_ms: 15_000 });
    expect(done.status).toBe('completed');
    const events = await collect(client, run_id);
    const failed = events.find((event) => event.kind === 'ToolCallFailed')!;
    expect(failed).toMatchObject({ error_code: 'result_timeout' });
    expect(failed.ts - expires_at).toBeLessThan(5_000);
    expect(await redis.zscore(`{${prefix}}:active`, run_id)).toBeNull();
  });

  it('is inspected and answered from the command line: --output JSON completes, --error TEXT fails, exactly one of them', async () => {
    const prefix = nextPrefix('tool-results-cli');
    const agent = new Agent({ name: 'browser-agent', tools: [locate()] });
    const provider = scriptedProvider([
      toolCalls([
        { name: 'get_location', args: { n: 1 }, id: 'call_one' },
        { name: 'get_location', args: { n: 2 }, id: 'call_two' },
      ]),
      (request) =>
        reply(
          request.messages
            .filter((message) => message.role === 'tool')
            .map((message) => String(message.content))
            .join(' | '),
        ),
    ]);
    const worker = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'browser-agent', input: 'Where?' });
    await until(async () => (await client.get(run_id))!.pending_tool_results?.length === 2);
    const cli = (...args: string[]) =>
      promisify(execFile)(process.execPath, [ARCFLOW_BIN, ...args], { env: { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix } });
    expect((await cli('inspect', run_id)).stdout).toContain(
      `waiting for a result: call_one get_location {"n":1} (arcflow tool-result ${run_id} call_one --output JSON | --error TEXT)`,
    );
    expect((await cli('get', run_id)).stdout).toMatch(/awaiting {3}call_two {2}get_location {"n":2}/);
    const usage = await cli('tool-result', run_id, 'call_one').catch((error: { stderr: string; code: number }) => error);
    expect(usage).toMatchObject({ code: 2, stderr: expect.stringContaining('exactly one of --output JSON and --error TEXT') });
    expect((await cli('tool-result', run_id, 'call_one', '--output', '{"city":"Oslo"}')).stdout).toMatch(/^call_one completed \(answered /);
    // A mistyped id is told from the calls that do wait.
    const mistyped = await cli('tool-result', run_id, 'call_tw0', '--output', '1').catch((error: { stderr: string; code: number }) => error);
    expect(mistyped).toMatchObject({
      code: 1,
      stderr: expect.stringContaining(`tool call 'call_tw0' of run '${run_id}' does not wait for a result (calls waiting for one: call_two)`),
    });
    expect(JSON.parse((await cli('tool-result', run_id, 'call_two', '--error', 'denied', '--json')).stdout)).toEqual({ status: 'failed', answered_at: expect.any(Number) });
    expect((await client.wait(run_id, { timeout_ms: 10_000 })).output).toBe('{"city":"Oslo"} | Error: denied');
    const late = await cli('tool-result', run_id, 'call_none', '--output', '1').catch((error: { stderr: string; code: number }) => error);
    expect(late).toMatchObject({ code: 1, stderr: expect.stringContaining('does not wait for a result (none of its calls waits for one)') });
  });

  it('fails a workflow tool step whose handler defers (a tool step has no round to wait in), as runLocal does', async () => {
    const deferring = tool({ name: 'later', description: 'x', input_schema: { type: 'object' }, handler: (_args, ctx) => ctx.defer() });
    const flow = new Workflow({ name: 'flow_defer', steps: [{ id: 'pay', tool: deferring, args: () => ({}) }] });
    const run = await engineRunner(() => nextPrefix('tool-results-flow'))(flow, 'go', {});
    expect(run.events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual(['tool_error']);
    expect(run.events.some((event) => event.kind === 'ToolResultRequested')).toBe(false);
  });

  it('still takes a timeout job added under the old name approval-timeout, without a kind (an approval)', async () => {
    const prefix = nextPrefix('tool-results-old-timeout');
    const refund = tool({ name: 'refund', description: 'x', input_schema: { type: 'object' }, needs_approval: true, handler: () => 'refunded' });
    const agent = new Agent({ name: 'clerk', tools: [refund] });
    const provider = scriptedProvider([toolCalls([{ name: 'refund', args: {}, id: 'c_refund' }]), reply('done')]);
    const worker = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'clerk', input: 'refund' });
    await until(async () => (await client.get(run_id))!.status === 'waiting');
    const providerQueue = new Queue(QueueName.agent('clerk'), { connection: redis, prefix: keysFor(prefix).tag });
    await providerQueue.add('approval-timeout', { run_id, step_id: 's1', iteration: 1, tool_call_id: 'c_refund', trace: {} }, { jobId: 'old-style-timeout' });
    await providerQueue.close();
    await client.wait(run_id, { timeout_ms: 10_000 });
    const events = await collect(client, run_id);
    expect(events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual(['approval_timeout']);
  });
});
