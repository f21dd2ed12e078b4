import { type CompleteOptions, ProviderFailure, type ProviderResponse } from '@arcflow/core';
import type OpenAI from 'openai';
import { classifyOpenAIError } from './errors.ts';
import { parseCompletion } from './parse.ts';
import { StreamAssembly } from './stream-assembly.ts';

/**
 * One chat-completions call with `stream: true` and `stream_options: { include_usage: true }`:
 * the chunks are assembled (text told to `onText` as it comes) and the assembled response parsed
 * like a whole one. A server that answers with a whole JSON response instead of Server-Sent
 * Events is read as one. Everything the SDK throws, mid-stream too, is classified.
 */
export async function completeStreaming(client: OpenAI, body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming, options: CompleteOptions): Promise<ProviderResponse> {
  try {
    const { data, response } = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal: options.signal }).withResponse();
    const contentType = response.headers.get('content-type') ?? '';
    if (!contentType.includes('text/event-stream')) {
      // Never iterated, so the SDK's stream has not touched the body.
      return parseCompletion(await readJson(response));
    }
    const assembly = new StreamAssembly(options.onText);
    for await (const chunk of data) assembly.add(chunk);
    return assembly.finish();
  } catch (error) {
    throw classifyOpenAIError(error);
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
