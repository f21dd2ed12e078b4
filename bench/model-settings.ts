// The cost of model settings on a provider call: the same chat-completions request through the
// OpenAI provider to a fake server on loopback, with and without every setting, alternated.
import type { ProviderRequest } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { startFakeOpenAI } from '@arcflow/testing';
import type { Row } from './lib.ts';

const CALLS = 400;
const REQUEST: ProviderRequest = {
  model: 'bench-model',
  messages: [
    { role: 'system', content: 'You are a bench.' },
    { role: 'user', content: 'Say hello.' },
  ],
  tools: [{ name: 'lookup', description: 'Looks a word up', parameters: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] } }],
};
const WITH_SETTINGS: ProviderRequest = {
  ...REQUEST,
  settings: {
    temperature: 0.2,
    top_p: 0.9,
    max_tokens: 256,
    stop: ['END'],
    seed: 7,
    frequency_penalty: 0.1,
    presence_penalty: 0.1,
    parallel_tool_calls: false,
    tool_choice: { name: 'lookup' },
    reasoning_effort: 'low',
    extra_body: { top_k: 20 },
  },
};

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** p50 of a provider call with every model setting against the same call without any. */
export async function modelSettingsRow(): Promise<Row> {
  const server = await startFakeOpenAI({ fallback: () => ({ type: 'text', content: 'hello' }) });
  try {
    const provider = openaiProvider({ base_url: server.url, api_key: 'bench' });
    const plain: number[] = [];
    const tuned: number[] = [];
    const time = async (request: ProviderRequest) => {
      const started = performance.now();
      await provider.complete(request);
      return performance.now() - started;
    };
    for (let warm = 0; warm < 50; warm += 1) await time(WITH_SETTINGS);
    for (let call = 0; call < CALLS; call += 1) {
      plain.push(await time(REQUEST));
      tuned.push(await time(WITH_SETTINGS));
    }
    const [withSettings, without] = [median(tuned), median(plain)];
    return {
      measure: `provider call p50 with every model setting (vs none), ${CALLS} each, fake server on loopback`,
      arcflow: `${withSettings.toFixed(3)} ms`,
      baseline: `${without.toFixed(3)} ms`,
      ratio: `${(withSettings / without).toFixed(2)}x`,
      target: '<= 1.05x',
      verdict: withSettings / without <= 1.05 ? 'yes' : 'NO',
    };
  } finally {
    await server.close();
  }
}
