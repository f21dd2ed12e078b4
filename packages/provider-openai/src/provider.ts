import { type CompleteOptions, ConfigError, type ModelProvider, type ProviderRequest, type ProviderResponse } from '@arcflow/core';
import OpenAI from 'openai';
import { classifyOpenAIError } from './errors.ts';
import { parseCompletion } from './parse.ts';
import { completeStreaming } from './streaming-call.ts';
import { type MaxTokensParam, maxTokensParamFor, toWire } from './wire.ts';

export interface OpenAIProviderOptions {
  /** Any OpenAI-compatible endpoint, e.g. `http://127.0.0.1:8000/v1`. Default: `OPENAI_BASE_URL`, else OpenAI. */
  base_url?: string;
  /** Default: `OPENAI_API_KEY`. */
  api_key?: string;
  /** Default model for agents that name none. Default: `ARCFLOW_MODEL`, else `gpt-4o-mini`. */
  model?: string;
  /** Per-request timeout in milliseconds, until the answer starts; a streamed answer may also fall silent this long at most (default 60 000). */
  timeout_ms?: number;
  /** Provider id recorded in events (default `openai`). */
  id?: string;
  /**
   * The body field `model_settings.max_tokens` is sent as. Default: `max_completion_tokens` for
   * OpenAI's own API (no base URL, `api.openai.com`, Azure OpenAI), `max_tokens` for any other server.
   */
  max_tokens_param?: MaxTokensParam;
  /**
   * Calls with `stream: true` (SPEC §12), so the run streams the text as the model writes it.
   * Default true; false for a server that cannot stream (a server that answers a streaming
   * request with a whole JSON response works either way).
   */
  stream?: boolean;
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
  const timeoutMs = options.timeout_ms ?? DEFAULT_TIMEOUT_MS;
  const client = new OpenAI({
    apiKey: apiKey ?? 'unused',
    baseURL,
    maxRetries: 0,
    timeout: timeoutMs,
    // The SDK logs a stream chunk it cannot parse, text and all; the failure is classified and reported instead.
    logLevel: 'off',
  });
  const stream = options.stream ?? true;
  if (typeof stream !== 'boolean') throw new ConfigError(`openaiProvider: stream must be true or false, got ${JSON.stringify(stream)}`);
  const defaultModel = options.model ?? process.env.ARCFLOW_MODEL ?? 'gpt-4o-mini';
  const maxTokensParam = options.max_tokens_param ?? maxTokensParamFor(baseURL);
  if (maxTokensParam !== 'max_tokens' && maxTokensParam !== 'max_completion_tokens') {
    throw new ConfigError(`openaiProvider: max_tokens_param must be 'max_tokens' or 'max_completion_tokens', got ${JSON.stringify(maxTokensParam)}`);
  }
  return {
    id: options.id ?? 'openai',
    defaultModel,
    async complete(request: ProviderRequest, callOptions: CompleteOptions = {}): Promise<ProviderResponse> {
      if (stream) return completeStreaming(client, toWire(request, maxTokensParam), callOptions, timeoutMs);
      let body: unknown;
      try {
        body = await client.chat.completions.create(toWire(request, maxTokensParam), { signal: callOptions.signal });
      } catch (error) {
        throw classifyOpenAIError(error);
      }
      return parseCompletion(body);
    },
  };
}
