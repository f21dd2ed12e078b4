import { Agent, ProviderFailure, runLocal, tool } from '@arcflow/core';
import { openaiProvider, retryAfterSeconds } from '@arcflow/provider-openai';
import { type FakeOpenAIServer, scriptedOverHttp, startFakeOpenAI } from '@arcflow/testing';
import { defineLoopScenarios } from '@arcflow/testing/scenarios';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAI();
});
afterAll(() => server.close());

// The whole scenario suite again, every model turn over real HTTP through the `openai` SDK.
defineLoopScenarios(
  'runLocal + OpenAI provider over HTTP',
  (agent, input, options) => runLocal(agent, input, { ...options, exec_config: options.exec_config as never, logger: options.logger ?? false }),
  (turns) => scriptedOverHttp(server, turns),
);

const provider = () => openaiProvider({ base_url: server.url, api_key: 'k', model: 'gpt-test', timeout_ms: 2_000 });
const weather = tool({
  name: 'get_weather',
  description: 'Current weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  handler: ({ city }: { city: string }) => `18°C in ${city}`,
});
const agent = new Agent({ name: 'researcher', instructions: 'Use get_weather.', tools: [weather] });
const fastRetry = { attempts: 3, backoff_ms: 10, max_backoff_ms: 20 };

describe('OpenAI provider', () => {
  it('sends tools in the OpenAI shape, parses tool calls and usage', async () => {
    server.reset([
      { type: 'tools', calls: [{ id: 'call_a', name: 'get_weather', arguments: { city: 'Oslo' } }] },
      { type: 'text', content: 'Mild.' },
    ]);
    const start = server.requests.length;
    const run = await runLocal(agent, 'Weather in Oslo?', { provider: provider() });
    expect(run.output).toBe('Mild.');
    const [first, second] = server.requests.slice(start);
    expect(first?.body).toMatchObject({
      model: 'gpt-test',
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Current weather for a city', parameters: { required: ['city'] } } }],
      messages: [{ role: 'system' }, { role: 'user', content: 'Weather in Oslo?' }],
    });
    expect(second?.body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'call_a', content: '18°C in Oslo' });
    expect(run.usage).toEqual({ input: 24, output: 14, total: 38 });
    expect(run.events.find((event) => event.kind === 'ProviderResponseReceived')).toMatchObject({
      provider_id: 'openai',
      model_id: 'gpt-test',
      finish_reason: 'tool_calls',
      tool_calls_count: 1,
      tokens: { input: 12, output: 7, total: 19 },
    });
  });

  it('waits out a 429 with Retry-After: 1 and records ProviderRateLimited, then succeeds', async () => {
    server.reset([
      { type: 'status', status: 429, headers: { 'retry-after': '1' } },
      { type: 'text', content: 'ok' },
    ]);
    const started = Date.now();
    const run = await runLocal(agent, 'hi', { provider: provider(), provider_retry: fastRetry });
    expect(run.status).toBe('completed');
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    const limited = run.events.filter((event) => event.kind === 'ProviderRateLimited');
    expect(limited).toEqual([expect.objectContaining({ provider_id: 'openai', retry_after_seconds: 1, attempt: 1, iteration: 1 })]);
  });

  it('retries 500s and a malformed body, each a retryable ProviderError', async () => {
    server.reset([{ type: 'status', status: 500 }, { type: 'malformed' }, { type: 'text', content: 'ok' }]);
    const run = await runLocal(agent, 'hi', { provider: provider(), provider_retry: fastRetry });
    expect(run.status).toBe('completed');
    const errors = run.events.filter((event) => event.kind === 'ProviderError');
    expect(errors).toEqual([
      expect.objectContaining({ error_code: 'server_error', status: 500, retryable: true, attempt: 1 }),
      expect.objectContaining({ error_code: 'malformed_response', retryable: true, attempt: 2 }),
    ]);
  });

  it('fails the run with provider_error when attempts run out', async () => {
    server.reset([
      { type: 'status', status: 503 },
      { type: 'status', status: 502 },
      { type: 'status', status: 500 },
    ]);
    const run = await runLocal(agent, 'hi', { provider: provider(), provider_retry: fastRetry });
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ code: 'ProviderError', error_code: 'provider_error' });
    expect(run.events.filter((event) => event.kind === 'ProviderError')).toHaveLength(3);
    expect(run.events.at(-2)).toMatchObject({ kind: 'StepExecutionFailed', error_code: 'provider_error' });
    expect(run.events.at(-1)).toMatchObject({ kind: 'RunFailed', error_code: 'provider_error' });
  });

  it('does not retry other 4xx', async () => {
    server.reset([
      { type: 'status', status: 400 },
      { type: 'text', content: 'never' },
    ]);
    const run = await runLocal(agent, 'hi', { provider: provider(), provider_retry: fastRetry });
    expect(run.status).toBe('failed');
    expect(run.events.filter((event) => event.kind === 'ProviderError')).toEqual([expect.objectContaining({ error_code: 'bad_request', status: 400, retryable: false })]);
  });

  it('fails at once, naming the cause, on what no retry can fix: a key no header can carry, a base URL that is not a URL', async () => {
    server.reset([{ type: 'text', content: 'never' }]);
    const asked = server.requests.length;
    const pasted = openaiProvider({ base_url: server.url, api_key: 'sk-…' });
    const run = await runLocal(agent, 'hi', { provider: pasted, provider_retry: fastRetry, logger: false });
    expect(run.error).toMatchObject({
      error_code: 'provider_error',
      message: expect.stringContaining('failed: api_key is not a valid HTTP header value (character U+2026 at position 4)'),
    });
    expect(run.events.filter((event) => event.kind === 'ProviderError')).toEqual([expect.objectContaining({ error_code: 'invalid_config', retryable: false })]);
    expect(server.requests).toHaveLength(asked);
    const nowhere = openaiProvider({ base_url: 'not a url', api_key: 'k' });
    const error = await nowhere.complete({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [] }).catch((thrown) => thrown);
    expect(error).toMatchObject({ error_code: 'invalid_config', retryable: false, message: 'the base URL is not a valid URL' });
    // fetch refuses some ports outright: no retry reaches them.
    const barred = openaiProvider({ base_url: 'http://127.0.0.1:6000/v1', api_key: 'k' });
    const refused = await barred.complete({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [] }).catch((thrown) => thrown);
    expect(refused).toMatchObject({ error_code: 'invalid_config', retryable: false, details: { cause: { code: 'bad_port', host: '127.0.0.1:6000' } } });
  });

  it('marks a refused connection unreachable, with its code and host; a local run hands it over to a fallback on another provider after one try', async () => {
    const closed = await startFakeOpenAI();
    const url = closed.url;
    await closed.close();
    const down = openaiProvider({ base_url: url, api_key: 'k', id: 'down' });
    const error = await down.complete({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [] }).catch((thrown) => thrown);
    expect(error).toMatchObject({ error_code: 'connection_error', retryable: true, message: 'could not reach the provider (ECONNREFUSED)' });
    expect(error.details).toMatchObject({ unreachable: true, cause: { code: 'ECONNREFUSED', host: new URL(url).host } });
    server.reset([{ type: 'text', content: 'from the spare' }]);
    const careful = new Agent({ name: 'careful', model_fallbacks: [{ model: 'spare-model', provider: 'spare' }] });
    const run = await runLocal(careful, 'hi', {
      provider: down,
      providers: { spare: openaiProvider({ base_url: server.url, api_key: 'k', id: 'spare' }) },
      provider_retry: fastRetry,
      logger: false,
    });
    expect(run).toMatchObject({ status: 'completed', output: 'from the spare' });
    expect(run.events.filter((event) => event.kind === 'ProviderError')).toEqual([expect.objectContaining({ provider_id: 'down', error_code: 'connection_error', attempt: 1 })]);
  });

  it('hands a 429 over at once to a fallback on another provider in a local run', async () => {
    const limited = await startFakeOpenAI({ turns: [{ type: 'status', status: 429, headers: { 'retry-after': '30' } }] });
    try {
      server.reset([{ type: 'text', content: 'from the spare' }]);
      const careful = new Agent({ name: 'careful', model_fallbacks: [{ model: 'spare-model', provider: 'spare' }] });
      const run = await runLocal(careful, 'hi', {
        provider: openaiProvider({ base_url: limited.url, api_key: 'k', id: 'limited' }),
        providers: { spare: openaiProvider({ base_url: server.url, api_key: 'k', id: 'spare' }) },
        logger: false,
      });
      expect(run).toMatchObject({ status: 'completed', output: 'from the spare' });
      expect(run.events.filter((event) => event.kind.startsWith('Provider')).map((event) => event.kind)).toEqual([
        'ProviderRequestSent',
        'ProviderRateLimited',
        'ProviderRequestSent',
        'ProviderResponseReceived',
      ]);
    } finally {
      await limited.close();
    }
  });

  it('classifies a timeout as retryable', async () => {
    server.reset([{ type: 'hang' }]);
    const slow = openaiProvider({ base_url: server.url, api_key: 'k', timeout_ms: 200 });
    const error = await slow.complete({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [] }).catch((thrown) => thrown);
    expect(error).toBeInstanceOf(ProviderFailure);
    expect(error).toMatchObject({ error_code: 'timeout', retryable: true });
  });

  it('flags a body without choices as malformed', async () => {
    server.reset([{ type: 'status', status: 200, body: { id: 'x', choices: [] } }]);
    const error = await provider()
      .complete({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [] })
      .catch((thrown) => thrown);
    expect(error).toMatchObject({ error_code: 'malformed_response', message: expect.stringContaining('choices[0].message') });
  });

  it('reads a list of content parts and a refusal as text, and answers a call with no name as an unknown tool', async () => {
    const body = (message: object) => ({ type: 'status' as const, status: 200, body: { id: 'x', choices: [{ index: 0, message: { role: 'assistant', ...message } }] } });
    server.reset([
      body({
        content: [
          { type: 'text', text: 'Mild ' },
          { type: 'image_url', image_url: {} },
          { type: 'text', text: 'and dry.' },
        ],
      }),
    ]);
    expect((await runLocal(agent, 'Weather?', { provider: provider() })).output).toBe('Mild and dry.');

    server.reset([body({ content: null, refusal: 'I cannot help with that.' })]);
    const refused = await runLocal(agent, 'Weather?', { provider: provider() });
    expect(refused).toMatchObject({ status: 'completed', output: 'I cannot help with that.', iterations: 1 });

    server.reset([body({ content: null, tool_calls: [{ id: 'call_n', type: 'function', function: { arguments: '{}' } }] }), { type: 'text', content: 'Sorry.' }]);
    const start = server.requests.length;
    const nameless = await runLocal(agent, 'Weather?', { provider: provider() });
    expect(nameless).toMatchObject({ status: 'completed', output: 'Sorry.' });
    expect(nameless.events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_call_id: 'call_n', error_code: 'unknown_tool' });
    expect(server.requests[start + 1]?.body.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_n', content: expect.stringMatching(/^Error: unknown tool /) });
  });

  it('reads retry-after-ms and HTTP dates', () => {
    expect(retryAfterSeconds(new Headers({ 'retry-after-ms': '1500' }))).toBe(1.5);
    expect(retryAfterSeconds(new Headers({ 'retry-after': 'Wed, 02 Dec 2026 10:00:05 GMT' }), Date.parse('Wed, 02 Dec 2026 10:00:00 GMT'))).toBe(5);
    expect(retryAfterSeconds(new Headers())).toBeUndefined();
    expect(retryAfterSeconds(new Headers({ 'retry-after': '7' }))).toBe(7);
    // Not the header's forms: no wait is read from them.
    for (const odd of ['0x10', '1e7', '-1', 'NaN', 'abc', '1.5.2']) expect(retryAfterSeconds(new Headers({ 'retry-after': odd }))).toBeUndefined();
  });
});
