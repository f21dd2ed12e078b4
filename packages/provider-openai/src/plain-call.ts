import type { CompleteOptions, ProviderResponse } from '@arcflow/core';
import type OpenAI from 'openai';
import { classifyOpenAIError } from './errors.ts';
import { parseCompletion } from './parse.ts';

/** One chat-completions call without streaming: the whole answer in one JSON body. */
export async function completePlain(client: OpenAI, body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming, options: CompleteOptions): Promise<ProviderResponse> {
  let answer: unknown;
  try {
    answer = await client.chat.completions.create(body, { signal: options.signal });
  } catch (error) {
    throw classifyOpenAIError(error);
  }
  return parseCompletion(answer);
}
