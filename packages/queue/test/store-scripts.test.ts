import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { RunStore } from '../src/runs/run-store.ts';

const prefix = testPrefix('store-scripts');
const redis = new Redis(TEST_REDIS_URL);

afterAll(async () => {
  await cleanupPrefix(prefix);
  await redis.quit();
});

describe('the run store on a Redis that lost its scripts', () => {
  it('loads a script again when Redis answers NOSCRIPT (restarted or flushed server)', async () => {
    const store = new RunStore(redis, prefix, 60);
    const spec = { run_id: 'run_scripts-1', agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '' };
    const enqueued = { kind: 'RunEnqueued', step_id: 's1', agent: 'a' } as const;
    expect(await store.createRun(spec, undefined, enqueued)).toEqual({ created: true, run_id: 'run_scripts-1' });
    // What a restarted Redis looks like to a long-running worker: its script cache is empty.
    await redis.script('FLUSH');
    expect(await store.createRun({ ...spec, run_id: 'run_scripts-2' }, undefined, enqueued)).toEqual({ created: true, run_id: 'run_scripts-2' });
    expect((await store.events('run_scripts-2')).map((event) => event.kind)).toEqual(['RunEnqueued']);
  });
});

describe('the run store under a resent write (a reply lost to a dropped connection)', () => {
  it('writes each event once when every script runs twice with the same arguments', async () => {
    const store = new RunStore(redis, prefix, 60);
    const run_id = 'run_resent-1';
    const twice = async <T>(write: () => Promise<T>) => {
      await write();
      return write();
    };
    const spec = { run_id, agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '' };
    expect(await twice(() => store.createRun(spec, undefined, { kind: 'RunEnqueued', step_id: 's1', agent: 'a' }))).toEqual({ created: false, run_id });
    const state = { step_id: 's1', iterations: 0, usage: { input: 0, output: 0, total: 0 }, messages: [], history: [], last_results: {}, tools_disabled: false };
    const invoked = { event: { kind: 'AgentInvoked', step_id: 's1', agent_name: 'a', mode: 'llm_select', max_iterations: 8 } as const, once: 'invoked|s1' };
    const sent = {
      event: { kind: 'ProviderRequestSent', step_id: 's1', iteration: 1, provider_id: 'p', model_id: 'm', prompt_size_bytes: 1, tools_count: 1 } as const,
      once: 'sent|s1|1|1',
    };
    expect(await twice(() => store.saveState(run_id, state as never, -1, [invoked, sent], true))).toBe('stale');
    await twice(() => store.append(run_id, [sent]));
    const response = {
      content: null,
      finish_reason: 'tool_calls',
      usage: { input: 3, output: 4, total: 7 },
      tool_calls: [{ id: 'c1', type: 'function' as const, function: { name: 't', arguments: '{}' } }],
    };
    const received = { event: { kind: 'TokensConsumed', step_id: 's1', iteration: 1, tokens: response.usage, cumulative: response.usage } as const };
    const call = { step_id: 's1', iteration: 1, tool_call_id: 'c1', tool_name: 't', fanned_out: true };
    await twice(() =>
      store.recordResponse(
        run_id,
        's1',
        1,
        { response, plan: { type: 'tools', calls: [{ index: 0, action: 'execute', signature: 'sig', fanned_out: true }] } },
        [received],
        [call],
      ),
    );
    const started = {
      event: { kind: 'ToolCallStarted', step_id: 's1', iteration: 1, tool_name: 't', tool_call_id: 'c1', input_schema_hash: 'h', input_size_bytes: 2, attempt: 1 } as const,
      ts: Date.now(),
    };
    expect(await twice(() => store.startToolCall(run_id, call, started, 'start|s1|1|c1|1'))).toEqual({ status: 'run' });
    const terminal = { kind: 'ToolCallCompleted', step_id: 's1', iteration: 1, tool_name: 't', tool_call_id: 'c1', duration_ms: 1, output_size_bytes: 2 } as const;
    expect(await twice(() => store.recordToolResult(run_id, call, { content: 'ok', terminal }))).toEqual({ content: 'ok', openInRound: 0, recordedNow: false });
    expect((await twice(() => store.finishRun(run_id, { outcome: { status: 'completed', output: 'done' }, step_id: 's1' }))).ended).toBe(false);
    const kinds = (await store.events(run_id)).map((event) => event.kind);
    expect(kinds).toEqual(['RunEnqueued', 'AgentInvoked', 'ProviderRequestSent', 'TokensConsumed', 'ToolCallStarted', 'ToolCallCompleted', 'RunCompleted']);
    expect(await store.getRun(run_id)).toMatchObject({ status: 'completed', usage: { input: 3, output: 4, total: 7 }, iterations: 1 });
  });

  it('refuses a write whose numbers are not whole before it changes anything', async () => {
    const store = new RunStore(redis, prefix, 60);
    const run_id = 'run_refused-1';
    await store.createRun({ run_id, agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '' }, undefined, {
      kind: 'RunEnqueued',
      step_id: 's1',
      agent: 'a',
    });
    const response = { content: null, finish_reason: 'tool_calls', usage: { input: 2.5, output: 1, total: 3.5 }, tool_calls: [] };
    await expect(store.recordResponse(run_id, 's1', 1, { response, plan: { type: 'complete' } }, [])).rejects.toThrow(/arcflow: usage.input must be a whole number >= 0/);
    expect((await store.events(run_id)).map((event) => event.kind)).toEqual(['RunEnqueued']);
    expect(await redis.exists(`${store.keys.record(run_id)}:s1:response:1`)).toBe(0);
    expect(await store.getRun(run_id)).toMatchObject({ status: 'queued', usage: { input: 0, output: 0, total: 0 }, iterations: 0 });
  });
});
