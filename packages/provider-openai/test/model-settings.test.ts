import { Agent, ConfigError, runLocal, tool } from '@arcflow/core';
import { maxTokensParamFor, openaiProvider } from '@arcflow/provider-openai';
import { type FakeOpenAIServer, startFakeOpenAI } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAI();
});
afterAll(() => server.close());

const lookup = tool({
  name: 'lookup',
  description: 'Looks a word up',
  input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
  handler: ({ word }: { word: string }) => `${word}: found`,
});

describe('model settings on the wire (OpenAI-compatible server over HTTP)', () => {
  it('sends every setting under its chat-completions name, the named tool_choice in its function form, and extra_body merged', async () => {
    server.reset([
      { type: 'tools', calls: [{ id: 'call_1', name: 'lookup', arguments: { word: 'a' } }] },
      { type: 'text', content: 'Done.' },
    ]);
    const start = server.requests.length;
    const sameNamed = { temperature: 0.3, top_p: 0.9, max_tokens: 128, stop: ['END'], seed: 42, frequency_penalty: 0.5, presence_penalty: -0.5, parallel_tool_calls: false };
    const agent = new Agent({
      name: 'tuned',
      tools: [lookup],
      model_settings: { ...sameNamed, tool_choice: { name: 'lookup' }, reasoning_effort: 'low', extra_body: { top_k: 20, repetition_penalty: 1.1 } },
    });
    const provider = openaiProvider({ base_url: server.url, api_key: 'k', model: 'local-model' });
    const run = await runLocal(agent, 'go', { provider, logger: false });
    expect(run.status).toBe('completed');
    const [first, second] = server.requests.slice(start).map((request) => request.body);
    expect(first).toMatchObject({
      ...sameNamed,
      model: 'local-model',
      tool_choice: { type: 'function', function: { name: 'lookup' } },
      reasoning_effort: 'low',
      top_k: 20,
      repetition_penalty: 1.1,
    });
    expect(first).not.toHaveProperty('max_completion_tokens');
    expect(second).toMatchObject({ tool_choice: 'auto', temperature: 0.3 });
  });

  it('sends nothing that is not set (a run that does not stream sends no streaming fields, SPEC §12)', async () => {
    server.reset([{ type: 'text', content: 'Plain.' }]);
    const start = server.requests.length;
    await runLocal(new Agent({ name: 'plain' }), 'go', { provider: openaiProvider({ base_url: server.url, api_key: 'k' }), logger: false });
    expect(Object.keys(server.requests[start]!.body).sort()).toEqual(['messages', 'model']);
  });

  it("sends max_tokens as max_completion_tokens to OpenAI's own API, and as max_tokens_param says", async () => {
    expect(maxTokensParamFor(undefined)).toBe('max_completion_tokens');
    expect(maxTokensParamFor('https://api.openai.com/v1')).toBe('max_completion_tokens');
    expect(maxTokensParamFor('https://team.openai.azure.com/openai/deployments/x')).toBe('max_completion_tokens');
    expect(maxTokensParamFor('https://team.cognitiveservices.azure.com/openai/deployments/x')).toBe('max_completion_tokens');
    expect(maxTokensParamFor('https://cognitiveservices.azure.com.example.org/v1')).toBe('max_tokens');
    expect(maxTokensParamFor('http://127.0.0.1:8000/v1')).toBe('max_tokens');
    server.reset([{ type: 'text', content: 'Short.' }]);
    const start = server.requests.length;
    const provider = openaiProvider({ base_url: server.url, api_key: 'k', max_tokens_param: 'max_completion_tokens' });
    await runLocal(new Agent({ name: 'capped', model_settings: { max_tokens: 16 } }), 'go', { provider, logger: false });
    expect(server.requests[start]!.body).toMatchObject({ max_completion_tokens: 16 });
    expect(server.requests[start]!.body).not.toHaveProperty('max_tokens');
    expect(() => openaiProvider({ base_url: server.url, api_key: 'k', max_tokens_param: 'tokens' as never })).toThrow(ConfigError);
  });
});
