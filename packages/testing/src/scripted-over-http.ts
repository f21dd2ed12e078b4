import { ProviderFailure, type ProviderRequest, type ProviderResponse } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import type { FakeOpenAIServer, FakeRequest, FakeTurn } from './fake-openai-server.ts';
import type { ScriptedProvider, ScriptedTurn } from './scripted-provider.ts';

/**
 * A scripted model served over real HTTP: the turns are queued on the fake server and the real
 * OpenAI provider (the `openai` SDK) fetches them. `requests` are what the server received, read
 * back into arcflow's request shape. One such model is in use at a time per server.
 */
export function scriptedOverHttp(server: FakeOpenAIServer, turns: readonly ScriptedTurn[]): ScriptedProvider {
  server.reset(turns.map(toFakeTurn));
  const start = server.requests.length;
  const provider = openaiProvider({ base_url: server.url, api_key: 'test-key', model: 'scripted-model', id: 'scripted', timeout_ms: 10_000 });
  return Object.defineProperty({ ...provider }, 'requests', {
    get: () => server.requests.slice(start).map(fromWire),
  }) as ScriptedProvider;
}

function toFakeTurn(turn: ScriptedTurn): FakeTurn {
  if (typeof turn === 'function' || turn instanceof ProviderFailure) throw new Error('scriptedOverHttp serves only plain responses');
  const response = turn as ProviderResponse;
  const usage = { prompt_tokens: response.usage.input, completion_tokens: response.usage.output };
  if (response.tool_calls.length === 0) return { type: 'text', content: response.content ?? '', usage };
  return {
    type: 'tools',
    usage,
    calls: response.tool_calls.map((call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments })),
  };
}

function fromWire(request: FakeRequest): ProviderRequest {
  const tools = (request.body.tools ?? []) as { function: { name: string; description: string; parameters: Record<string, unknown> } }[];
  return {
    model: request.body.model,
    messages: request.body.messages,
    tools: tools.map(({ function: fn }) => ({ name: fn.name, description: fn.description, parameters: fn.parameters })),
    ...(request.body.response_format ? { response_format: request.body.response_format } : {}),
  };
}
