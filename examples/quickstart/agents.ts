// agents.ts
import { Agent, tool } from 'arcflow';

export const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  timeout_ms: 10_000, // ctx.signal aborts after this
  concurrency: 4, // at most 4 running across every worker
  retries: 2, // extra attempts for handler errors
  handler: async ({ city }, ctx) => `18°C in ${city}`, // ctx.idempotency_key is stable across retries
});

export const researcher = new Agent({
  name: 'researcher',
  instructions: 'Use get_weather when you need facts.',
  tools: [getWeather],
  tool_execution: { mode: 'llm_select', max_iterations: 5 },
  model_settings: { temperature: 0.2, max_tokens: 800 }, // sent with each model call (docs/models.md)
});
