import { Agent, type StepState, silentLogger } from '@arcflow/core';
import { createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, reply, scriptedProvider, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { StoredFormatError, readResponse, readState, writeResponse, writeState } from '../src/records/formats.ts';
import { readOutput } from '../src/records/output-format.ts';
import { FAST, testResources } from './harness.ts';
import { uncompacted } from './uncompact.ts';

const { prefixes, open, redis } = testResources();

const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };

async function engine(name: string, agent: Agent, turns: string[]) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  open.push(await startWorker({ agents: [agent], provider: scriptedProvider(turns.map((text) => reply(text))), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return { prefix, client };
}

describe('structured output in the store (SPEC §11)', () => {
  it('keeps a repair as format 3 and everything else as format 2 (a state as format 4), and the record as JSON text with output_type', async () => {
    const { prefix, client } = await engine('output-stored', new Agent({ name: 'stored_output', output_schema: schema }), ['{"answer":7}', '{"answer":"seven"}']);
    const { run_id } = await client.enqueue({ agent: 'stored_output', input: 'go' });
    const run = await client.wait(run_id, { timeout_ms: 10_000 });
    await uncompacted(redis, prefix, run_id);
    expect(run).toMatchObject({ status: 'completed', output: '{"answer":"seven"}', output_json: { answer: 'seven' }, iterations: 2 });
    const keys = keysFor(prefix).run(run_id);
    const [first, second] = (await redis.mget(keys.response('s1', 1), keys.response('s1', 2))).map((json) => JSON.parse(json!));
    expect(first).toMatchObject({ v: 3, plan: { type: 'repair_output', violation_description: 'answer: expected string' } });
    expect(second).toMatchObject({ v: 2, plan: { type: 'complete' } });
    expect(JSON.parse((await redis.hget(keys.state('s1'), 'json'))!)).toMatchObject({ v: 4, messages: 3, state: { iterations: 1, output_rejections: 1 } });
    expect(await redis.llen(keys.transcript('s1'))).toBe(3);
    expect(await redis.hget(keysFor(prefix).record(run_id), 'output_type')).toBe('json');
  });

  it('keeps a plain run as it was: no output_type, no output_json', async () => {
    const { prefix, client } = await engine('output-plain', new Agent({ name: 'plain_output' }), ['{"answer":"not parsed"}']);
    const { run_id } = await client.enqueue({ agent: 'plain_output', input: 'go' });
    const run = await client.wait(run_id, { timeout_ms: 10_000 });
    expect(run.output).toBe('{"answer":"not parsed"}');
    expect(run).not.toHaveProperty('output_json');
    expect(await redis.hget(keysFor(prefix).record(run_id), 'output_type')).toBeNull();
  });

  it('refuses a malformed repair as unreadable by any version, and a format it does not know as newer', () => {
    const response = { content: 'x', tool_calls: [], finish_reason: 'stop', usage: { input: 1, output: 1, total: 2 } };
    const repair = { response, plan: { type: 'repair_output' as const, violation_description: 'output is not valid JSON' } };
    expect(readResponse(writeResponse(repair), 'response 1')).toEqual(repair);
    const unreadable = (read: () => unknown) => {
      try {
        read();
      } catch (error) {
        expect(error).toBeInstanceOf(StoredFormatError);
        return !(error as StoredFormatError).newer;
      }
      throw new Error('expected a StoredFormatError');
    };
    expect(unreadable(() => readResponse(JSON.stringify({ v: 3, response, plan: { type: 'repair_output' } }), 'response 1'))).toBe(true);
    // A repair can only have been written as format 3.
    expect(unreadable(() => readResponse(JSON.stringify({ ...repair, v: 2 }), 'response 1'))).toBe(true);
    const state: StepState = { step_id: 's1', iterations: 1, messages: [], usage: response.usage, history: [], last_results: {}, tools_disabled: false, output_rejections: 1 };
    const { messages: _inline, ...listed } = state;
    // A state is written as format 4 (its messages in the step's transcript list); 3 and 2 (messages inline) still read.
    expect(readState(writeState(state), 'state')).toEqual({ kind: 'listed', state: listed, messages: 0 });
    expect(readState(JSON.stringify({ v: 3, state }), 'state')).toEqual({ kind: 'inline', state });
    expect(unreadable(() => readState(JSON.stringify({ v: 2, state }), 'state'))).toBe(true);
    expect(unreadable(() => readState(JSON.stringify({ v: 3.5, state }), 'state'))).toBe(true);
    expect(unreadable(() => readState(JSON.stringify({ v: 4, state }), 'state'))).toBe(true);
    expect(unreadable(() => readState(JSON.stringify({ v: 7, state }), 'state'))).toBe(false);
    // Format 5: a state that began on a thread's conversation names those messages (`earlier`) and is the only one written in 5.
    const began: StepState = {
      ...state,
      messages: [{ role: 'system', content: 'i' }, ...Array.from({ length: 3 }, () => ({ role: 'user' as const, content: 't' }))],
      earlier: { at: 1, count: 2 },
    };
    const written = JSON.parse(writeState(began));
    expect(written).toMatchObject({ v: 5, messages: 2, state: { earlier: { at: 1, count: 2 } } });
    expect(readState(writeState(began), 'state')).toMatchObject({ kind: 'listed', messages: 2, state: { earlier: { at: 1, count: 2 } } });
    expect(unreadable(() => readState(JSON.stringify({ ...written, v: 4 }), 'state'))).toBe(true);
    expect(unreadable(() => readState(JSON.stringify({ ...written, state: listed }), 'state'))).toBe(true);
    expect(unreadable(() => readState(JSON.stringify({ ...written, state: { ...written.state, earlier: { at: 3, count: 2 } } }), 'state'))).toBe(true);
    expect(unreadable(() => readState(JSON.stringify({ ...written, state: { ...written.state, earlier: { at: 1, count: -1 } } }), 'state'))).toBe(true);
    // Format 6: a state whose run has a run state says how many of its recorded changes it has seen (SPEC §17).
    const stateful = JSON.parse(writeState({ ...began, state_entries: 3 }));
    expect(stateful).toMatchObject({ v: 6, state: { state_entries: 3, earlier: { at: 1, count: 2 } } });
    expect(readState(JSON.stringify(stateful), 'state')).toMatchObject({ kind: 'listed', state: { state_entries: 3 } });
    expect(unreadable(() => readState(JSON.stringify({ ...stateful, v: 5 }), 'state'))).toBe(true);
    expect(unreadable(() => readState(JSON.stringify({ ...written, v: 6 }), 'state'))).toBe(true);
    expect(unreadable(() => readState(JSON.stringify({ ...stateful, state: { ...stateful.state, state_entries: 0 } }), 'state'))).toBe(true);
  });

  it('reads an output by its type: JSON parsed, text (or a type it does not know) as it is', () => {
    expect(readOutput('{"a":1}', 'json')).toEqual({ output: '{"a":1}', output_json: { a: 1 } });
    expect(readOutput('null', 'json')).toEqual({ output: 'null', output_json: null });
    expect(readOutput('{"a":1}', undefined)).toEqual({ output: '{"a":1}' });
    expect(readOutput('<a/>', 'xml')).toEqual({ output: '<a/>' });
    expect(readOutput('{damaged', 'json')).toEqual({ output: '{damaged' });
    expect(readOutput(undefined, 'json')).toEqual({});
  });
});
