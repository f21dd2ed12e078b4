import type { ModelSettings, ProviderRequest } from '@arcflow/core';
import type OpenAI from 'openai';

/** Which body field carries `max_tokens` (SPEC §16). */
export type MaxTokensParam = 'max_tokens' | 'max_completion_tokens';

/**
 * OpenAI's own API (no base URL, an `api.openai.com` host, or Azure OpenAI) takes
 * `max_completion_tokens`, which its reasoning models require (they answer 400 to `max_tokens`);
 * other OpenAI-compatible servers take `max_tokens`.
 */
/** Azure OpenAI's hosts: a resource's own (`<name>.openai.azure.com`) and an Azure AI services resource's. */
const AZURE_OPENAI_HOSTS = ['.openai.azure.com', '.cognitiveservices.azure.com'];

export function maxTokensParamFor(baseUrl: string | undefined): MaxTokensParam {
  if (!baseUrl) return 'max_completion_tokens';
  let host: string;
  try {
    host = new URL(baseUrl).hostname.toLowerCase();
  } catch {
    return 'max_tokens';
  }
  return host === 'api.openai.com' || AZURE_OPENAI_HOSTS.some((suffix) => host.endsWith(suffix)) ? 'max_completion_tokens' : 'max_tokens';
}

/**
 * The chat-completions body for a request: messages, tools, each setting under its wire name, and
 * `response_format` when the step has an output schema (SPEC §11; it wins over one in `extra_body`).
 */
export function toWire(request: ProviderRequest, maxTokensParam: MaxTokensParam): OpenAI.Chat.ChatCompletionCreateParamsNonStreaming {
  const settings: ModelSettings = request.settings ?? {};
  const { extra_body, max_tokens, tool_choice, stop, ...plain } = settings;
  return {
    // Server-specific options first: arcflow's own fields win (extra_body may not name them, SPEC §16).
    ...(extra_body ?? {}),
    ...plain,
    ...(stop !== undefined ? { stop: typeof stop === 'string' ? stop : [...stop] } : {}),
    ...(max_tokens !== undefined ? { [maxTokensParam]: max_tokens } : {}),
    ...(tool_choice !== undefined ? { tool_choice: typeof tool_choice === 'string' ? tool_choice : { type: 'function' as const, function: { name: tool_choice.name } } } : {}),
    model: request.model,
    messages: request.messages as OpenAI.Chat.ChatCompletionMessageParam[],
    ...(request.tools.length > 0
      ? { tools: request.tools.map((tool) => ({ type: 'function' as const, function: { name: tool.name, description: tool.description, parameters: tool.parameters } })) }
      : {}),
    ...(request.response_format ? { response_format: { type: 'json_schema' as const, json_schema: { ...request.response_format.json_schema } } } : {}),
  };
}
