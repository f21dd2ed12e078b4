// The cost of model settings on a provider call: the same chat-completions request through the
// OpenAI provider to a fake server on loopback, with and without every setting, alternated.
import type { ProviderRequest } from '@arcflow/core';
import { openaiProvider, toWire } from '@arcflow/provider-openai';
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

/** Microseconds per call of `fn`, the median of 9 batches of 20,000. */
function microseconds(fn: () => unknown): number {
  const batches: number[] = [];
  for (let batch = 0; batch < 9; batch += 1) {
    const started = performance.now();
    for (let call = 0; call < 20_000; call += 1) fn();
    batches.push(((performance.now() - started) * 1000) / 20_000);
  }
  return median(batches);
}

/** What arcflow itself spends on the settings: building the request body with every setting, and without. */
export function wireRow(): Row {
  for (let warm = 0; warm < 20_000; warm += 1) toWire(WITH_SETTINGS, 'max_tokens');
  const plain = microseconds(() => toWire(REQUEST, 'max_tokens'));
  const tuned = microseconds(() => toWire(WITH_SETTINGS, 'max_tokens'));
  return {
    measure: 'request body built by the provider, every model setting (vs none)',
    arcflow: `${tuned.toFixed(2)} µs`,
    baseline: `${plain.toFixed(2)} µs`,
    ratio: `+${(tuned - plain).toFixed(2)} µs`,
    target: 'info',
    verdict: '-',
  };
}

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
      // The server parses a body some 250 bytes longer: part of the difference is not arcflow's.
      target: '<= 1.10x',
      verdict: withSettings / without <= 1.1 ? 'yes' : 'NO',
    };
  } finally {
    await server.close();
  }
}
