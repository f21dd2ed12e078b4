import { type FakeOpenAIServer, type FakeRequest, type FakeTurn, startFakeOpenAI } from '@arcflow/testing';

/** The metered fixture, loaded by the worker processes of the metrics tests. */
export const METERED_FIXTURE = new URL('./fixtures/metered-agents.ts', import.meta.url).pathname;

/** Tokens each call of a run reports: the tool call, then the answer. */
export const USAGE = { toolCall: { prompt_tokens: 10, completion_tokens: 5 }, answer: { prompt_tokens: 20, completion_tokens: 7 } };

/**
 * The fake model of the metered agents: asks for the request's first tool once, then answers once
 * the tool's result is in the conversation (one tool round per run, two provider calls); refuses
 * every request for `broken-model` with a 400.
 */
export function startMeteredModel(canary: string): Promise<FakeOpenAIServer> {
  return startFakeOpenAI({
    fallback: (request: FakeRequest): FakeTurn => {
      if (request.body.model === 'broken-model') return { type: 'status', status: 400, body: { error: { message: 'refused' } } };
      const answered = (request.body.messages as { role: string }[]).some((message) => message.role === 'tool');
      const tool = (request.body.tools as { function: { name: string } }[] | undefined)?.[0]?.function.name;
      return answered || !tool
        ? { type: 'text', content: `${canary}-answer`, usage: USAGE.answer }
        : { type: 'tools', calls: [{ name: tool, arguments: { city: `${canary}-city` } }], usage: USAGE.toolCall };
    },
  });
}

/** The worker's environment for the metered fixture: the fake model, the test's prefix, the canary. */
export function meteredEnv(model: FakeOpenAIServer, redis: string, prefix: string, canary: string): Record<string, string> {
  return {
    REDIS_URL: redis,
    ARCFLOW_PREFIX: prefix,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'test-key',
    ARCFLOW_MODEL: 'fake-model',
    CANARY: canary,
    OTEL_EXPORTER_OTLP_ENDPOINT: '',
  };
}

export { freePort } from '@arcflow/testing';
