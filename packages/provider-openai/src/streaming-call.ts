import { type CompleteOptions, ProviderFailure, type ProviderResponse } from '@arcflow/core';
import OpenAI from 'openai';
import { classifyOpenAIError } from './errors.ts';
import { StreamAssembly } from './stream-assembly.ts';

/**
 * A streamed request that failed before its first chunk in a way a plain request may not: an
 * HTTP status other than 401, 403, 404 and 429, or a body that is not an event stream (a whole
 * JSON answer included: SPEC §12 has the request made again without streaming). `failure` is what
 * the call failed with, classified.
 */
export class StreamRefused extends Error {
  override readonly name = 'StreamRefused';
  constructor(readonly failure: ProviderFailure) {
    super(failure.message);
  }
}

/** Statuses a plain request would meet too: credentials, a missing model or route, a rate limit. */
const NOT_ABOUT_STREAMING = new Set([401, 403, 404, 429]);

/**
 * One chat-completions call with `stream: true` and `stream_options: { include_usage: true }`:
 * the chunks are assembled (text told to `onText` as it comes) and the assembled response parsed
 * like a whole one. A server that answers with anything but Server-Sent Events, a whole JSON
 * answer too, refuses streaming: its body is not read. The SDK's timeout ends at the response's
 * headers, so a stream that falls silent for `idleTimeoutMs` is aborted here, a retryable
 * `timeout`. Everything the SDK throws, mid-stream too, is classified; a failure before the first
 * chunk that streaming may have caused is thrown as {@link StreamRefused}.
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
  let chunks = 0;
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
      await response.body?.cancel().catch(() => undefined);
      throw new ProviderFailure(
        'malformed_response',
        `the provider answered a streamed request with ${contentType ? `'${contentType.split(';')[0]}'` : 'no content type'}, not an event stream`,
        {
          retryable: true,
        },
      );
    }
    const assembly = new StreamAssembly(options.onText);
    watch();
    for await (const chunk of data) {
      watch();
      chunks += 1;
      if (chunks === 1) options.onFirstChunk?.();
      assembly.add(chunk);
    }
    return assembly.finish();
  } catch (error) {
    if (silent) throw new ProviderFailure('timeout', `the provider's stream sent nothing for ${idleTimeoutMs} ms`, { retryable: true });
    const failure = classifyOpenAIError(error);
    if (chunks === 0 && !options.signal?.aborted && refusedStreaming(error, failure)) throw new StreamRefused(failure);
    throw failure;
  } finally {
    clearTimeout(idle);
    options.signal?.removeEventListener('abort', stopOnCancel);
  }
}

/** Whether a failure before the first chunk may be the server's trouble with streaming (see {@link StreamRefused}). */
function refusedStreaming(error: unknown, failure: ProviderFailure): boolean {
  if (error instanceof OpenAI.APIError && typeof error.status === 'number') return !NOT_ABOUT_STREAMING.has(error.status);
  // A body that is not an event stream, or an event stream whose first event is not a chunk.
  return failure.error_code === 'malformed_response';
}
