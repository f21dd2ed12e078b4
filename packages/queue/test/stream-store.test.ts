import { type StreamChunk, StreamReassembler } from '@arcflow/core';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RunStore } from '../src/runs/run-store.ts';

const prefix = testPrefix('stream-store');
const redis = new Redis(TEST_REDIS_URL);
const store = new RunStore(redis, prefix, 60);

afterAll(async () => {
  await cleanupPrefix(prefix);
  await redis.quit();
});

let runs = 0;
async function newRun(): Promise<string> {
  runs += 1;
  const run_id = `run_stream-${runs}`;
  await store.createRun({ run_id, agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '' }, undefined, {
    kind: 'RunEnqueued',
    step_id: 's1',
    agent: 'a',
  });
  return run_id;
}

const answer = (content: string) => ({
  response: { content, tool_calls: [], finish_reason: 'stop', usage: { input: 1, output: 1, total: 2 } },
  plan: { type: 'complete' as const },
});
const record = (run_id: string, content: string, attempt: number, pending: string) =>
  store.recordResponse(run_id, 's1', 1, answer(content), [], [], undefined, 0, { attempt, text: content, pending, calls: [] });
const texts = (chunks: readonly StreamChunk[]) => {
  const reassembler = new StreamReassembler();
  for (const chunk of chunks) reassembler.add(chunk);
  return reassembler.texts().map((entry) => entry.text);
};

describe("the run's stream in Redis (SPEC §12)", () => {
  it('numbers chunks 1, 2, 3 …, completes a streamed answer with what was left, and ends once, last', async () => {
    const run_id = await newRun();
    expect(await store.streams.appendText(run_id, 's1', 1, 1, 'Hello, ')).toBe(true);
    expect(await store.streams.appendText(run_id, 's1', 1, 1, 'wor')).toBe(true);
    await record(run_id, 'Hello, world.', 1, 'ld.');
    await store.finishRun(run_id, { outcome: { status: 'completed', output: 'Hello, world.' }, step_id: 's1' });
    await store.finishRun(run_id, { outcome: { status: 'completed', output: 'Hello, world.' }, step_id: 's1' });
    const chunks = await store.streams.read(run_id, 0);
    expect(chunks.map((chunk) => [chunk.offset, chunk.type])).toEqual([
      [1, 'text'],
      [2, 'text'],
      [3, 'text'],
      [4, 'end'],
    ]);
    expect(texts(chunks)).toEqual(['Hello, world.']);
    expect(await store.streams.read(run_id, 2)).toEqual(chunks.slice(2));
    // Nothing after the end.
    expect(await store.streams.appendText(run_id, 's1', 2, 1, 'late')).toBe(false);
  });

  it('resets the iteration when a later attempt streams, and drops an older attempt and anything after the response is recorded', async () => {
    const run_id = await newRun();
    await store.streams.appendText(run_id, 's1', 1, 1, 'First try, cut');
    expect(await store.streams.appendText(run_id, 's1', 1, 2, 'Second')).toBe(true);
    expect(await store.streams.appendText(run_id, 's1', 1, 1, ' (stale worker)')).toBe(false);
    await record(run_id, 'Second try.', 2, ' try.');
    expect(await store.streams.appendText(run_id, 's1', 1, 3, 'too late')).toBe(false);
    const chunks = await store.streams.read(run_id, 0);
    expect(chunks.map((chunk) => chunk.type)).toEqual(['text', 'reset', 'text', 'text']);
    expect(chunks[1]).toMatchObject({ type: 'reset', step_id: 's1', iteration: 1, attempt: 2 });
    expect(texts(chunks)).toEqual(['Second try.']);
  });

  it('writes the whole recorded text again when what was streamed does not add up (a lost write, another attempt shown, no streaming)', async () => {
    const lost = await newRun();
    await store.streams.appendText(lost, 's1', 1, 1, 'Part one, ');
    // 'part two, ' never arrived.
    await record(lost, 'Part one, part two, part three.', 1, 'part three.');
    expect(texts(await store.streams.read(lost, 0))).toEqual(['Part one, part two, part three.']);

    const other = await newRun();
    await store.streams.appendText(other, 's1', 1, 2, 'Attempt two was shown');
    await record(other, 'Attempt one answered.', 1, '');
    expect(texts(await store.streams.read(other, 0))).toEqual(['Attempt one answered.']);

    const plain = await newRun();
    await record(plain, 'Not streamed.', 1, '');
    expect(await store.streams.read(plain, 0)).toMatchObject([{ offset: 1, type: 'text', delta: 'Not streamed.' }]);
  });

  it('never writes a reset for an older attempt than one already shown: a stale delivery that answers last is shown as the next attempt', async () => {
    const run_id = await newRun();
    await store.streams.appendText(run_id, 's1', 1, 1, 'First delivery, ');
    await store.streams.appendText(run_id, 's1', 1, 3, 'Third delivery, still going');
    // The first delivery's worker was only slow: it answers before the third records anything.
    await store.recordResponse(
      run_id,
      's1',
      1,
      {
        response: { ...answer('First delivery, done.').response, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{}' } }] },
        plan: { type: 'complete' as const },
      },
      [],
      [],
      undefined,
      0,
      { attempt: 1, text: 'First delivery, done.', pending: 'done.', calls: [['call_1', 'lookup']] },
    );
    const chunks = await store.streams.read(run_id, 0);
    expect(chunks.map((chunk) => chunk.type)).toEqual(['text', 'reset', 'text', 'reset', 'text', 'tool_call']);
    // Every chunk's attempt is at least that of every chunk of the iteration before it.
    const attempts = chunks.map((chunk) => ('attempt' in chunk ? chunk.attempt : 0));
    expect(attempts).toEqual([1, 3, 3, 4, 4, 4]);
    expect(texts(chunks)).toEqual(['First delivery, done.']);
  });

  it("keeps the text the stream shows last as a cancelled run's output", async () => {
    const run_id = await newRun();
    await store.streams.appendText(run_id, 's1', 1, 1, 'An answer ');
    await store.streams.appendText(run_id, 's1', 1, 2, 'A better ');
    await store.streams.appendText(run_id, 's1', 1, 2, 'answer, half way');
    await store.finishRun(run_id, { outcome: { status: 'cancelled' }, step_id: 's1' });
    expect((await store.getRun(run_id))?.output).toBe('A better answer, half way');
    expect((await store.streams.read(run_id, 0)).at(-1)).toMatchObject({ type: 'end', status: 'cancelled' });
  });

  it('refuses an entry it cannot read, or a gap, with a clear error', async () => {
    const run_id = await newRun();
    const key = store.keys.run(run_id).stream;
    await redis.xadd(key, '0-1', 'c', '{"type":"text","step_id":"s1","iteration":1,"attempt":1,"delta":"ok"}');
    await redis.xadd(key, '0-3', 'c', '{"type":"end","status":"completed"}');
    await expect(store.streams.read(run_id, 0)).rejects.toThrow(/follows offset 1: the stream has a gap/);
    await redis.xadd(key, '0-4', 'c', 'not json');
    await expect(store.streams.read(run_id, 3)).rejects.toThrow(/stream entry 0-4 is not a chunk/);
    await redis.xadd(key, '7-0', 'c', '{"type":"end","status":"completed"}');
    await expect(store.streams.read(run_id, 4)).rejects.toThrow(/stream entry 7-0 is not a chunk/);
  });
});
