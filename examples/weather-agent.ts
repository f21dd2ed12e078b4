import { Agent, type ModelProvider, type ProviderRequest, type ProviderResponse, ToolArgumentError, Workflow, tool } from 'arcflow';

/** The examples the demo runs: a travel researcher agent with three tools, and a city briefing workflow. */
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

const CURRENCIES: Record<string, string> = { Oslo: 'NOK', Lisbon: 'EUR', Tokyo: 'JPY', Lima: 'PEN' };

/**
 * A briefing on a city (the run input is the city's name): weather and local time researched in
 * parallel by two agents, 100 EUR converted by a tool step with no model call, and a writer that
 * starts once all three are done and gets their outputs under `[weather]`, `[local_time]` and `[fx]`.
 */
export const cityBriefing = new Workflow({
  name: 'city_briefing',
  steps: [
    { id: 'weather', agent: new Agent({ name: 'weather_researcher', instructions: 'Report the weather in the city you are given.', tools: [getWeather] }) },
    { id: 'local_time', agent: new Agent({ name: 'time_researcher', instructions: 'Report the local time offset of the city.', tools: [getLocalTime] }) },
    { id: 'fx', tool: convertCurrency, args: ({ input }) => ({ amount: 100, from: 'EUR', to: CURRENCIES[input.trim()] ?? 'USD' }) },
    {
      id: 'report',
      agent: new Agent({ name: 'briefing_writer', instructions: 'Write a three-line briefing from the research you are given.' }),
      depends_on: ['weather', 'local_time', 'fx'],
    },
  ],
});

export default [travelResearcher, cityBriefing];

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
      const input = String(request.messages.find((m) => m.role === 'user')?.content);
      const city = /Oslo|Lisbon|Tokyo|Lima/.exec(input)?.[0] ?? 'Oslo';
      const rounds = request.messages.filter((m) => m.role === 'assistant').length;
      const usage = { input: 120 + rounds * 60, output: 30, total: 150 + rounds * 60 };
      const offered = request.tools.map((spec) => spec.name);
      // The briefing's steps: one tool each, or none for the writer.
      if (offered.length <= 1) return briefingTurn(offered[0], city, input, request, usage);
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

/** A turn of a briefing step: call its one tool, then report what it returned; the writer sums up the research. */
function briefingTurn(tool: string | undefined, city: string, input: string, request: ProviderRequest, usage: ProviderResponse['usage']): ProviderResponse {
  const result = request.messages.find((m) => m.role === 'tool')?.content;
  if (tool && result === undefined) return calls(usage, [[tool, { city }]]);
  return { content: briefingText(tool, String(result), input), tool_calls: [], finish_reason: 'stop', usage };
}

function briefingText(tool: string | undefined, result: string, input: string): string {
  if (tool === 'get_weather') return `Weather: ${result}.`;
  if (tool === 'get_local_time') {
    const offset = Number(JSON.parse(result).utc_offset_hours);
    return `Local time: UTC${offset >= 0 ? '+' : ''}${offset}.`;
  }
  // The writer's input: the city, then each step's output after a blank line and its `[step]` label.
  const [city, ...sections] = input.split('\n\n');
  const research = sections.map((section) => section.slice(section.indexOf('\n') + 1));
  return `Briefing for ${city}: ${research.join(' ')}`;
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
