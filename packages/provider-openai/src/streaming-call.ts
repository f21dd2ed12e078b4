import { type CompleteOptions, ProviderFailure, type ProviderResponse } from '@arcflow/core';
import type OpenAI from 'openai';
import { classifyOpenAIError } from './errors.ts';
import { parseCompletion } from './parse.ts';
import { StreamAssembly } from './stream-assembly.ts';

/**
 * One chat-completions call with `stream: true` and `stream_options: { include_usage: true }`:
 * the chunks are assembled (text told to `onText` as it comes) and the assembled response parsed
 * like a whole one. A server that answers with a whole JSON response instead of Server-Sent
 * Events is read as one. The SDK's timeout ends at the response's headers, so a stream that falls
 * silent for `idleTimeoutMs` is aborted here, a retryable `timeout`. Everything the SDK throws,
 * mid-stream too, is classified.
 */
export async function completeStreaming(
  client: OpenAI,
  body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming,
  options: CompleteOptions,
  idleTimeoutMs: number,
): Promise<ProviderResponse> {
  const controller = new AbortController();
  const stopOnCancel = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', stopOnCancel, { once: true });
  if (options.signal?.aborted) stopOnCancel();
  let idle: NodeJS.Timeout | undefined;
  let silent = false;
  const watch = () => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      silent = true;
      controller.abort();
    }, idleTimeoutMs);
  };
  try {
    const { data, response } = await client.chat.completions
      .create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal: controller.signal })
      .withResponse();
    const contentType = response.headers.get('content-type') ?? '';
    if (!contentType.includes('text/event-stream')) {
      // Never iterated, so the SDK's stream has not touched the body.
      return parseCompletion(await readJson(response));
    }
    const assembly = new StreamAssembly(options.onText);
    watch();
    for await (const chunk of data) {
      watch();
      assembly.add(chunk);
    }
    return assembly.finish();
  } catch (error) {
    if (silent) throw new ProviderFailure('timeout', `the provider's stream sent nothing for ${idleTimeoutMs} ms`, { retryable: true });
    throw classifyOpenAIError(error);
  } finally {
    clearTimeout(idle);
    options.signal?.removeEventListener('abort', stopOnCancel);
  }
}

async function readJson(response: Response): Promise<unknown> {
  try {
    return await response.json();
  } catch (error) {
    if (error instanceof SyntaxError) throw new ProviderFailure('malformed_response', 'the provider sent a body that is not valid JSON', { retryable: true });
    throw error;
  }
}
