import { Agent, runLocal } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type FakeOpenAIServer, startFakeOpenAI } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAI();
});
afterAll(() => server.close());

const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };

describe('structured output on the wire (OpenAI-compatible server over HTTP)', () => {
  it('sends response_format json_schema on every call, and the repair as a user message after the rejected answer', async () => {
    server.reset([
      { type: 'text', content: '{"town":"Oslo"}' },
      { type: 'text', content: '{"city":"Oslo"}' },
    ]);
    const start = server.requests.length;
    // extra_body may carry a response_format of its own: the output schema's wins.
    const agent = new Agent({ name: 'geo.parser', output_schema: schema, model_settings: { extra_body: { response_format: { type: 'json_object' } } } });
    const run = await runLocal(agent, 'where?', { provider: openaiProvider({ base_url: server.url, api_key: 'k', model: 'local-model' }), logger: false });
    expect(run.status).toBe('completed');
    expect(run.output_json).toEqual({ city: 'Oslo' });
    const [first, second] = server.requests.slice(start).map((request) => request.body);
    const format = { type: 'json_schema', json_schema: { name: 'geo_parser', schema, strict: true } };
    expect(first?.response_format).toEqual(format);
    expect(second?.response_format).toEqual(format);
    expect(second?.messages.slice(-2)).toEqual([
      { role: 'assistant', content: '{"town":"Oslo"}' },
      { role: 'user', content: 'Error: invalid output — city: required; (root): unexpected property' },
    ]);
  });

  it('asks without strict decoding for a schema outside the strict subset, and sends no response_format without a schema', async () => {
    server.reset([
      { type: 'text', content: '["a"]' },
      { type: 'text', content: 'plain' },
    ]);
    const start = server.requests.length;
    const provider = openaiProvider({ base_url: server.url, api_key: 'k' });
    const loose = { type: 'array', items: { type: 'string', minLength: 1 } };
    const run = await runLocal(new Agent({ name: 'lister' }), 'list', { provider, config: { output_schema: loose }, logger: false });
    expect(run.output_json).toEqual(['a']);
    await runLocal(new Agent({ name: 'plain' }), 'go', { provider, logger: false });
    const [structured, plain] = server.requests.slice(start).map((request) => request.body);
    expect(structured?.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'lister', schema: loose, strict: false } });
    expect(plain).not.toHaveProperty('response_format');
  });
});
