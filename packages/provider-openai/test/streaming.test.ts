import { ProviderFailure, type ProviderRequest } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type FakeOpenAIServer, startFakeOpenAI } from '@arcflow/testing';
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
const provider = (url: string, stream?: boolean) => openaiProvider({ base_url: url, api_key: 'k', timeout_ms: 2_000, ...(stream === undefined ? {} : { stream }) });

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
    await expect(quick.complete(request)).rejects.toMatchObject({ error_code: 'timeout', retryable: true });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('stops when the caller aborts', async () => {
    server.reset([{ type: 'text', content: 'This answer stops half way and the connection stays open.', stream_fault: 'stall' }]);
    const aborted = new AbortController();
    setTimeout(() => aborted.abort(), 100);
    await expect(provider(server.url).complete(request, { signal: aborted.signal })).rejects.toBeInstanceOf(ProviderFailure);
  });

  it('reads a whole JSON answer from a server that does not stream', async () => {
    plain.reset([{ type: 'text', content: 'Whole.' }]);
    const { response, deltas } = await complete(plain.url);
    expect(plain.requests.at(-1)?.body.stream).toBe(true);
    expect(response.content).toBe('Whole.');
    expect(deltas).toEqual([]);
  });

  it('does not ask to stream when told the server cannot', async () => {
    server.reset([{ type: 'text', content: 'Plain.' }]);
    const { response } = await complete(server.url, false);
    expect(server.requests.at(-1)?.body.stream).toBeUndefined();
    expect(response.content).toBe('Plain.');
  });

  it('classifies an error status as before', async () => {
    server.reset([{ type: 'status', status: 503 }]);
    await expect(complete(server.url)).rejects.toMatchObject({ error_code: 'server_error', retryable: true });
  });

  it('refuses a stream option that is not a boolean', () => {
    expect(() => openaiProvider({ base_url: server.url, api_key: 'k', stream: 'yes' as never })).toThrow(/stream must be true or false/);
  });
});
