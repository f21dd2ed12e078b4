import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProviderFailure, type ProviderRequest } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type FakeOpenAIServer, type FakeTurn, startFakeOpenAI } from '@arcflow/testing';
import { PLAIN_FOR_MS, PlainModels } from '../src/plain-models.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let server: FakeOpenAIServer;
let plain: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAI({ stream: { chunk_chars: 3 } });
  plain = await startFakeOpenAI({ never_stream: true });
});
afterAll(async () => {
  await server.close();
  await plain.close();
});

const request: ProviderRequest = {
  model: 'gpt-test',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [{ name: 'get_weather', description: 'weather', parameters: { type: 'object' } }],
};
const provider = (url: string, stream?: boolean) =>
  openaiProvider({ base_url: url, api_key: 'k', timeout_ms: 2_000, logger: levelLogger(), ...(stream === undefined ? {} : { stream }) });

async function complete(url: string, stream?: boolean) {
  const deltas: string[] = [];
  const response = await provider(url, stream).complete(request, { onText: (delta) => deltas.push(delta) });
  return { response, deltas };
}

describe('OpenAI provider, streaming (SPEC §12)', () => {
  it('asks to stream with usage, tells the text as it comes, and assembles the same response', async () => {
    server.reset([{ type: 'text', content: 'Mild in Oslo today.', usage: { prompt_tokens: 5, completion_tokens: 4 } }]);
    const { response, deltas } = await complete(server.url);
    expect(server.requests.at(-1)?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join('')).toBe('Mild in Oslo today.');
    expect(response).toMatchObject({ content: 'Mild in Oslo today.', tool_calls: [], finish_reason: 'stop', usage: { input: 5, output: 4, total: 9 } });
  });

  it('puts tool calls together from fragments split across chunks, in index order', async () => {
    server.reset([
      {
        type: 'tools',
        calls: [
          { id: 'call_a', name: 'get_weather', arguments: { city: 'Oslo', days: 3 } },
          { id: 'call_b', name: 'get_weather', arguments: { city: 'Bergen' } },
        ],
      },
    ]);
    const { response, deltas } = await complete(server.url);
    expect(deltas).toEqual([]);
    expect(response.content).toBeNull();
    expect(response.finish_reason).toBe('tool_calls');
    expect(response.tool_calls).toEqual([
      { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo","days":3}' } },
      { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Bergen"}' } },
    ]);
  });

  it.each(['cut', 'bad_chunk', 'no_finish'] as const)('fails a %s stream as a retryable malformed response', async (fault) => {
    server.reset([{ type: 'text', content: 'This answer will not arrive whole.', stream_fault: fault }]);
    const failure = await complete(server.url).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ProviderFailure);
    expect(failure).toMatchObject({ error_code: 'malformed_response', retryable: true });
  });

  it('gives up on a stream that falls silent, as a retryable timeout', async () => {
    server.reset([{ type: 'text', content: 'This answer stops half way and the connection stays open.', stream_fault: 'stall' }]);
    const quick = openaiProvider({ base_url: server.url, api_key: 'k', timeout_ms: 300 });
    const started = Date.now();
    await expect(quick.complete(request, { onText: () => undefined })).rejects.toMatchObject({ error_code: 'timeout', retryable: true });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("never puts text of a streamed error event into the failure's sentence (the run's error), whatever its code says", async () => {
    // A stream whose event is an error object, its code echoing the prompt.
    const echo = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end('data: {"error":{"message":"bad","code":"echo: my SSN is 123-45-6789"}}\n\n');
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/v1`;
      const failure = (await openaiProvider({ base_url: url, api_key: 'k', timeout_ms: 2_000, stream: true })
        .complete(request, { onText: () => undefined })
        .catch((error: unknown) => error)) as ProviderFailure;
      expect(failure).toBeInstanceOf(ProviderFailure);
      expect(failure.message).not.toContain('SSN');
      expect(JSON.stringify(failure.details)).not.toContain('SSN');
    } finally {
      await new Promise((resolve) => echo.close(resolve));
    }
  });

  it('stops when the caller aborts', async () => {
    server.reset([{ type: 'text', content: 'This answer stops half way and the connection stays open.', stream_fault: 'stall' }]);
    const aborted = new AbortController();
    setTimeout(() => aborted.abort(), 100);
    await expect(provider(server.url).complete(request, { signal: aborted.signal, onText: () => undefined })).rejects.toBeInstanceOf(ProviderFailure);
  });

  it('asks again without streaming when a server answers a streamed request with a whole JSON body, then calls that model without streaming', async () => {
    plain.reset([
      { type: 'text', content: 'Whole.' },
      { type: 'text', content: 'Plain again.' },
    ]);
    const logger = levelLogger();
    const ignoring = openaiProvider({ base_url: plain.url, api_key: 'k', timeout_ms: 2_000, logger });
    const before = plain.requests.length;
    const deltas: string[] = [];
    const first = await ignoring.complete(request, { onText: (delta) => deltas.push(delta) });
    expect(first.content).toBe('Whole.');
    expect(deltas).toEqual([]);
    const second = await ignoring.complete(request, { onText: (delta) => deltas.push(delta) });
    expect(second.content).toBe('Plain again.');
    expect(plain.requests.slice(before).map((received) => received.body.stream)).toEqual([true, undefined, undefined]);
    expect(logger.lines.filter((line) => line.level === 'warn')).toMatchObject([
      { message: expect.stringMatching(/without streaming for 10 minutes/), fields: { model: 'gpt-test', error_code: 'malformed_response' } },
    ]);
  });

  it('does not ask to stream when told the server cannot', async () => {
    server.reset([{ type: 'text', content: 'Plain.' }]);
    const { response } = await complete(server.url, false);
    expect(server.requests.at(-1)?.body.stream).toBeUndefined();
    expect(response.content).toBe('Plain.');
  });

  it('classifies an error status as before: a 503 to the streamed request and to the plain one made after it', async () => {
    server.reset([
      { type: 'status', status: 503 },
      { type: 'status', status: 503 },
    ]);
    const before = server.requests.length;
    await expect(complete(server.url)).rejects.toMatchObject({ error_code: 'server_error', retryable: true });
    expect(server.requests.slice(before).map((received) => received.body.stream)).toEqual([true, undefined]);
  });

  it('makes a plain call when the run does not stream (no onText)', async () => {
    server.reset([{ type: 'text', content: 'Plain for a run nobody watches.' }]);
    const response = await provider(server.url).complete(request);
    expect(server.requests.at(-1)?.body.stream).toBeUndefined();
    expect(server.requests.at(-1)?.body.stream_options).toBeUndefined();
    expect(response.content).toBe('Plain for a run nobody watches.');
  });

  it('refuses a stream option that is not a boolean', () => {
    expect(() => openaiProvider({ base_url: server.url, api_key: 'k', stream: 'yes' as never })).toThrow(/stream must be true or false/);
  });
});

/** A logger that keeps each line with its level. */
function levelLogger() {
  const lines: { level: string; message: string; fields?: Record<string, unknown> }[] = [];
  const at = (level: string) => (message: string, fields?: Record<string, unknown>) => lines.push({ level, message, fields });
  return { lines, info: at('info'), warn: at('warn'), error: at('error') };
}

describe('OpenAI provider, a server that cannot stream (SPEC §12)', () => {
  const toolsTurn: FakeTurn = { type: 'tools', calls: [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Oslo' } }] };

  it('asks again at once without streaming, then calls that model without streaming, with one warn line', async () => {
    const hostile = await startFakeOpenAI({ cannot_stream: 'tool_calls', turns: [toolsTurn, { type: 'text', content: 'Mild.' }, toolsTurn] });
    try {
      const logger = levelLogger();
      const stubborn = openaiProvider({ base_url: hostile.url, api_key: 'k', timeout_ms: 2_000, logger });
      const first = await stubborn.complete(request, { onText: () => undefined });
      expect(first.tool_calls).toMatchObject([{ id: 'call_1', function: { name: 'get_weather' } }]);
      expect(hostile.requests.map((received) => received.body.stream)).toEqual([true, undefined]);
      const deltas: string[] = [];
      const second = await stubborn.complete(request, { onText: (delta) => deltas.push(delta) });
      expect(second.content).toBe('Mild.');
      expect(deltas).toEqual([]);
      // Another model of the same provider still streams.
      await stubborn.complete({ ...request, model: 'other-model' }, { onText: () => undefined });
      expect(hostile.requests.map((received) => received.body.stream)).toEqual([true, undefined, undefined, true, undefined]);
      expect(logger.lines.filter((line) => line.level === 'warn').map((line) => line.fields?.model)).toEqual(['gpt-test', 'other-model']);
      expect(logger.lines[0]).toMatchObject({ level: 'warn', message: expect.stringMatching(/without streaming for 10 minutes/), fields: { provider: 'openai', status: 500 } });
    } finally {
      await hostile.close();
    }
  });

  it('with stream: true never falls back; with stream: false never streams', async () => {
    const hostile = await startFakeOpenAI({ cannot_stream: 'always', turns: [toolsTurn, toolsTurn] });
    try {
      const always = openaiProvider({ base_url: hostile.url, api_key: 'k', timeout_ms: 2_000, stream: true, logger: levelLogger() });
      await expect(always.complete(request, { onText: () => undefined })).rejects.toMatchObject({ error_code: 'server_error', status: 500, retryable: true });
      expect(hostile.requests.map((received) => received.body.stream)).toEqual([true]);
      const never = openaiProvider({ base_url: hostile.url, api_key: 'k', timeout_ms: 2_000, stream: false });
      expect((await never.complete(request, { onText: () => undefined })).tool_calls).toHaveLength(1);
      expect(hostile.requests.map((received) => received.body.stream)).toEqual([true, undefined]);
    } finally {
      await hostile.close();
    }
  });

  it.each([401, 403, 404, 429])('does not ask again without streaming after HTTP %i', async (status) => {
    server.reset([{ type: 'status', status }]);
    const before = server.requests.length;
    await expect(complete(server.url)).rejects.toBeInstanceOf(ProviderFailure);
    expect(server.requests.length - before).toBe(1);
  });

  it('asks again without streaming after a body that is not an event stream', async () => {
    server.reset([{ type: 'malformed' }, { type: 'text', content: 'Whole, after all.' }]);
    const before = server.requests.length;
    const { response } = await complete(server.url);
    expect(response.content).toBe('Whole, after all.');
    expect(server.requests.slice(before).map((received) => received.body.stream)).toEqual([true, undefined]);
  });

  it('calls the model without streaming for 10 minutes, then streams again', () => {
    const models = new PlainModels();
    expect(models.add('m', 1_000)).toBe(true);
    expect(models.add('m', 2_000)).toBe(false);
    expect(models.has('m', 2_000 + PLAIN_FOR_MS - 1)).toBe(true);
    expect(models.has('m', 2_000 + PLAIN_FOR_MS)).toBe(false);
    expect(models.has('other', 2_000)).toBe(false);
  });
});

describe('OpenAI provider, streamed refusals and empty answers (SPEC §12)', () => {
  it.each([
    ['a refusal', { type: 'refusal', refusal: 'I cannot help with that.' } as FakeTurn, 'I cannot help with that.'],
    ['an empty answer', { type: 'text', content: '' } as FakeTurn, ''],
  ])('reads %s streamed exactly as one not streamed', async (_name, turn, content) => {
    server.reset([turn, turn]);
    const streamed = await complete(server.url);
    const whole = await provider(server.url).complete(request);
    expect(server.requests.slice(-2).map((received) => received.body.stream)).toEqual([true, undefined]);
    expect(whole).toMatchObject({ content, tool_calls: [], finish_reason: 'stop' });
    expect(streamed.response).toEqual(whole);
  });
});
