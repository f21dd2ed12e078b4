import { Agent, type ModelProvider, type ProviderRequest, type ProviderResponse, ToolArgumentError, tool } from 'arcflow';

/** The example agent the demo runs: a travel researcher with three tools. */
export const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather for a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string' }, units: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
    required: ['city'],
  },
  timeout_ms: 10_000,
  concurrency: 4,
  handler: async ({ city, units }: { city: string; units?: string }, ctx) => {
    await sleep(120 + (city.length % 5) * 40, ctx.signal);
    const celsius = 8 + (city.charCodeAt(0) % 15);
    return units === 'fahrenheit' ? `${Math.round(celsius * 1.8 + 32)}°F in ${city}` : `${celsius}°C in ${city}`;
  },
});

export const getLocalTime = tool({
  name: 'get_local_time',
  description: 'Local time in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  handler: async ({ city }: { city: string }, ctx) => {
    await sleep(80, ctx.signal);
    const offsets: Record<string, number> = { Oslo: 1, Lisbon: 0, Tokyo: 9, Lima: -5 };
    const offset = offsets[city];
    if (offset === undefined) throw new ToolArgumentError(`no time zone known for that city; try one of ${Object.keys(offsets).join(', ')}`);
    return { city, utc_offset_hours: offset };
  },
});

export const convertCurrency = tool({
  name: 'convert_currency',
  description: 'Converts an amount between currencies',
  input_schema: {
    type: 'object',
    properties: { amount: { type: 'number' }, from: { type: 'string', minLength: 3, maxLength: 3 }, to: { type: 'string', minLength: 3, maxLength: 3 } },
    required: ['amount', 'from', 'to'],
  },
  handler: async ({ amount, from, to }: { amount: number; from: string; to: string }) => {
    const rates: Record<string, number> = { EUR: 1, NOK: 11.6, JPY: 162, PEN: 4.1, USD: 1.08 };
    const [a, b] = [rates[from], rates[to]];
    if (!a || !b) throw new ToolArgumentError('unsupported currency');
    return `${amount} ${from} = ${((amount / a) * b).toFixed(2)} ${to}`;
  },
});

export const travelResearcher = new Agent({
  name: 'travel_researcher',
  role: 'Travel analyst',
  instructions: 'Use the tools for facts; answer in two sentences.',
  tools: [getWeather, getLocalTime, convertCurrency],
  tool_execution: { mode: 'llm_select', max_iterations: 5 },
});

export default [travelResearcher];

/**
 * An offline stand-in for a model, so the demo needs no API key: first turn, it asks for
 * weather, time and a conversion in parallel (one call with a deliberate schema mistake, which
 * the model "fixes" next turn); then it answers from the tool results it was given.
 */
export function offlineTravelModel(): ModelProvider {
  return {
    id: 'offline',
    defaultModel: 'offline-travel-model',
    async complete(request: ProviderRequest): Promise<ProviderResponse> {
      await sleep(40);
      const city = /Oslo|Lisbon|Tokyo|Lima/.exec(String(request.messages.find((m) => m.role === 'user')?.content))?.[0] ?? 'Oslo';
      const rounds = request.messages.filter((m) => m.role === 'assistant').length;
      const usage = { input: 120 + rounds * 60, output: 30, total: 150 + rounds * 60 };
      if (rounds === 0) {
        return calls(usage, [
          ['get_weather', { city }],
          ['get_local_time', { city }],
          ['convert_currency', { amount: '100', from: 'EUR', to: 'NOK' }],
        ]);
      }
      if (rounds === 1) return calls(usage, [['convert_currency', { amount: 100, from: 'EUR', to: 'NOK' }]]);
      const results = request.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
      return {
        content: `In ${city}: ${results[0]}; local offset ${results[1]}. ${results.at(-1)}.`,
        tool_calls: [],
        finish_reason: 'stop',
        usage,
      };
    },
  };
}

function calls(usage: ProviderResponse['usage'], list: [string, unknown][]): ProviderResponse {
  const id = Math.random().toString(36).slice(2, 8);
  return {
    content: null,
    finish_reason: 'tool_calls',
    usage,
    tool_calls: list.map(([name, args], index) => ({ id: `call_${id}_${index + 1}`, type: 'function', function: { name, arguments: JSON.stringify(args) } })),
  };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/** The worker uses this provider unless OPENAI_API_KEY / OPENAI_BASE_URL are set. */
export const provider = offlineTravelModel();
