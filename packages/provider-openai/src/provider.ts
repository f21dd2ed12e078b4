import { type CompleteOptions, ConfigError, type ModelProvider, ProviderFailure, type ProviderRequest, type ProviderResponse, type ToolLogger, stderrLogger } from '@arcflow/core';
import OpenAI from 'openai';
import { classifyOpenAIError } from './errors.ts';
import { completePlain } from './plain-call.ts';
import { PLAIN_FOR_MS, PlainModels } from './plain-models.ts';
import { StreamRefused, completeStreaming } from './streaming-call.ts';
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
   * Streaming (SPEC §12) of the calls of runs that ask for it. Default: streamed, and a model
   * whose server fails a streamed request before its first chunk (an HTTP status other than 401,
   * 403, 404 and 429, or a body that is not an event stream) is asked again at once without
   * streaming, then called without streaming for 10 minutes. `false`: never streams. `true`:
   * always streams what runs ask to stream, never falling back.
   */
  stream?: boolean;
  /** Where the provider's one line about a model it stops streaming goes (default: JSON lines on stderr). */
  logger?: ToolLogger;
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
  // A key no HTTP header can carry fails every call at once, naming where it came from.
  const keyProblem = headerValueProblem(apiKey, options.api_key === undefined ? 'OPENAI_API_KEY' : 'api_key');
  const host = hostOf(baseURL);
  const timeoutMs = options.timeout_ms ?? DEFAULT_TIMEOUT_MS;
  const client = new OpenAI({
    apiKey: apiKey ?? 'unused',
    baseURL,
    maxRetries: 0,
    timeout: timeoutMs,
    // The SDK logs a stream chunk it cannot parse, text and all; the failure is classified and reported instead.
    logLevel: 'off',
  });
  const stream = options.stream;
  if (stream !== undefined && typeof stream !== 'boolean') throw new ConfigError(`openaiProvider: stream must be true or false, got ${JSON.stringify(stream)?.slice(0, 40)}`);
  const logger = options.logger ?? stderrLogger('provider-openai');
  const plainModels = new PlainModels();
  const defaultModel = options.model ?? process.env.ARCFLOW_MODEL ?? 'gpt-4o-mini';
  const maxTokensParam = options.max_tokens_param ?? maxTokensParamFor(baseURL);
  if (maxTokensParam !== 'max_tokens' && maxTokensParam !== 'max_completion_tokens') {
    throw new ConfigError(`openaiProvider: max_tokens_param must be 'max_tokens' or 'max_completion_tokens', got ${JSON.stringify(maxTokensParam)}`);
  }
  const id = options.id ?? 'openai';
  return {
    id,
    defaultModel,
    async complete(request: ProviderRequest, callOptions: CompleteOptions = {}): Promise<ProviderResponse> {
      if (keyProblem) throw keyProblem.atHost(host);
      try {
        return await call(request, callOptions);
      } catch (error) {
        // Every failure says which host it met (for the logs and the run's error).
        throw classifyOpenAIError(error).atHost(host);
      }
    },
  };

  async function call(request: ProviderRequest, callOptions: CompleteOptions): Promise<ProviderResponse> {
    const body = toWire(request, maxTokensParam);
    // Only a run that streams asks to; a plain call serves the others, and a server that cannot stream.
    if (!callOptions.onText || stream === false || plainModels.has(request.model)) return completePlain(client, body, callOptions);
    try {
      return await completeStreaming(client, body, callOptions, timeoutMs);
    } catch (error) {
      if (!(error instanceof StreamRefused)) throw error;
      if (stream === true) throw error.failure;
      const response = await completePlain(client, body, callOptions);
      if (plainModels.add(request.model)) {
        logger.warn(`a streamed request failed before its first chunk and a plain one worked: this model's calls are made without streaming for ${PLAIN_FOR_MS / 60_000} minutes`, {
          provider: id,
          model: request.model,
          status: error.failure.status,
          error_code: error.failure.error_code,
          plain_for_ms: PLAIN_FOR_MS,
        });
      }
      return response;
    }
  }
}

/**
 * Why `value` cannot be sent as an HTTP header value (a character outside Latin-1, such as the
 * `…` of a key copied from an example, or a control character), as a non-retryable failure naming
 * `source`; undefined when it can. Never quotes the value.
 */
function headerValueProblem(value: string | undefined, source: string): ProviderFailure | undefined {
  if (value === undefined) return undefined;
  const chars = [...value];
  const at = chars.findIndex((char) => char.codePointAt(0)! > 0xff || /[\0\r\n]/.test(char));
  if (at < 0) return undefined;
  const what = `U+${chars[at]!.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
  return new ProviderFailure('invalid_config', `${source} is not a valid HTTP header value (character ${what} at position ${at + 1}); set it to the key itself`, {
    retryable: false,
    cause: { name: 'TypeError', code: 'invalid_header_value' },
  });
}

/** The host calls go to, for logs: the base URL's, else OpenAI's. */
function hostOf(baseURL: string | undefined): string {
  try {
    return new URL(baseURL ?? 'https://api.openai.com/v1').host;
  } catch {
    return 'an invalid base URL';
  }
}
