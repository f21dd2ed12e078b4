// The concierge: it asks the browser for the user's location (a browser tool: no handler, the page
// runs it), then books a table once the user confirms (a tool that needs approval). Run it with
// `arcflow worker --module examples/browser-tools/agents.ts`; without OPENAI_API_KEY the worker
// uses the scripted model below, so the page works end to end with no key.
import { Agent, type ModelProvider, type ProviderResponse, tool } from 'arcflow';

/** Runs in the browser: the page answers with the user's city (or an error when they refuse). */
export const getLocation = tool({
  name: 'get_location',
  description: "The user's current city, from their browser",
  input_schema: { type: 'object', properties: { reason: { type: 'string' } }, required: ['reason'] },
  output_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  result_timeout_ms: 10 * 60_000,
});

/** Runs on a worker, once the user approves it in the page. */
export const bookTable = tool({
  name: 'book_table',
  description: 'Books a table for two tonight',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  needs_approval: true,
  handler: async ({ city }: { city: string }) => `booked: a table for two tonight in ${city}, 19:30`,
});

export const concierge = new Agent({
  name: 'concierge',
  instructions: 'Find where the user is with get_location, then book a table there with book_table.',
  tools: [getLocation, bookTable],
});

export default [concierge];

/** The scripted model: ask for the location, then book there, then say what happened. */
export const provider: ModelProvider = {
  id: 'concierge-script',
  defaultModel: 'script',
  async complete(request): Promise<ProviderResponse> {
    const usage = { input: 10, output: 5, total: 15 };
    const results = request.messages.filter((message) => message.role === 'tool').map((message) => String(message.content));
    const call = (id: string, name: string, args: unknown): ProviderResponse => ({
      content: null,
      finish_reason: 'tool_calls',
      usage,
      tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
    });
    if (results.length === 0) return call('call_location', 'get_location', { reason: 'to find a restaurant near you' });
    const where = /"city":"([^"]+)"/.exec(results[0]!)?.[1];
    if (!where) return { content: `I could not find where you are (${results[0]}).`, tool_calls: [], finish_reason: 'stop', usage };
    if (results.length === 1) return call('call_booking', 'book_table', { city: where });
    return { content: `You are in ${where}. ${results[1]}`, tool_calls: [], finish_reason: 'stop', usage };
  },
};
