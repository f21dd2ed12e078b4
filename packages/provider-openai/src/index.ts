export { openaiProvider, type OpenAIProviderOptions } from './provider.ts';
export { classifyOpenAIError, retryAfterSeconds } from './errors.ts';
export { parseCompletion } from './parse.ts';
export { toWire, maxTokensParamFor, type MaxTokensParam } from './wire.ts';
