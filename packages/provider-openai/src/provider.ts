import { ConfigError, type ModelProvider, type ProviderRequest, type ProviderResponse } from '@arcflow/core';
import OpenAI from 'openai';
import { classifyOpenAIError } from './errors.ts';
import { parseCompletion } from './parse.ts';

export interface OpenAIProviderOptions {
  /** Any OpenAI-compatible endpoint, e.g. `http://127.0.0.1:8000/v1`. Default: `OPENAI_BASE_URL`, else OpenAI. */
  base_url?: string;
  /** Default: `OPENAI_API_KEY`. */
  api_key?: string;
  /** Default model for agents that name none. Default: `ARCFLOW_MODEL`, else `gpt-4o-mini`. */
  model?: string;
  /** Per-request timeout in milliseconds (default 60 000). */
  timeout_ms?: number;
  /** Provider id recorded in events (default `openai`). */
  id?: string;
}

const DEFAULT_TIMEOUT_MS = 60_000;

/**
 * The OpenAI-compatible provider on the `openai` SDK. The SDK's own retries are off: the runner
 * or the queue owns retries, so attempts never multiply.
 */
export function openaiProvider(options: OpenAIProviderOptions = {}): ModelProvider {
  const apiKey = options.api_key ?? process.env.OPENAI_API_KEY;
  const baseURL = options.base_url ?? process.env.OPENAI_BASE_URL;
  if (!apiKey && !baseURL) {
    throw new ConfigError('openaiProvider needs an API key: pass api_key or set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)');
  }
  const client = new OpenAI({
    apiKey: apiKey ?? 'unused',
    baseURL,
    maxRetries: 0,
    timeout: options.timeout_ms ?? DEFAULT_TIMEOUT_MS,
  });
  const defaultModel = options.model ?? process.env.ARCFLOW_MODEL ?? 'gpt-4o-mini';
  return {
    id: options.id ?? 'openai',
    defaultModel,
    async complete(request: ProviderRequest, callOptions?: { signal?: AbortSignal }): Promise<ProviderResponse> {
      let body: unknown;
      try {
        body = await client.chat.completions.create(toWire(request), { signal: callOptions?.signal });
      } catch (error) {
        throw classifyOpenAIError(error);
      }
      return parseCompletion(body);
    },
  };
}

function toWire(request: ProviderRequest): OpenAI.Chat.ChatCompletionCreateParamsNonStreaming {
  return {
    model: request.model,
    messages: request.messages as OpenAI.Chat.ChatCompletionMessageParam[],
    ...(request.tools.length > 0
      ? { tools: request.tools.map((tool) => ({ type: 'function' as const, function: { name: tool.name, description: tool.description, parameters: tool.parameters } })) }
      : {}),
  };
}
