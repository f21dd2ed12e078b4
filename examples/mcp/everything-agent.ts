// An agent whose tools come from an MCP server: @modelcontextprotocol/server-everything, started
// over stdio by each worker (docs/mcp.md). Run it: npx arcflow worker --module examples/mcp/everything-agent.ts
import { createRequire } from 'node:module';
import { Agent, mcpTools } from 'arcflow';

// The server's entry, run with this Node: no npm process stands between the worker and the server.
const serverEverything = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

/** One value per server: every agent that lists it shares the worker's one client of that server. */
export const everything = mcpTools({
  server: 'everything',
  transport: { type: 'stdio', command: process.execPath, args: [serverEverything, 'stdio'] },
  include: ['echo', 'get-sum', 'trigger-long-running-operation'],
  timeout_ms: 20_000,
  tools: { 'trigger-long-running-operation': { concurrency: 1, retries: 1 } },
});

export const mcpDemo = new Agent({
  name: 'mcp-demo',
  instructions: 'Use the tools to answer; add numbers with everything_get-sum.',
  tools: [everything],
});
