import { fileURLToPath } from 'node:url';
import { Agent, runLocal } from '@arcflow/core';
import { mcpTools } from '@arcflow/mcp';
import { capturingLogger, reply, scriptedProvider, toolCalls } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';

// Against a small MCP server made with the SDK (fixtures/answering-server.mjs), over stdio.
const SERVER = fileURLToPath(new URL('./fixtures/answering-server.mjs', import.meta.url));
const answering = mcpTools({ server: 'answering', transport: { type: 'stdio', command: process.execPath, args: [SERVER] }, retries: 2 });

describe("an MCP server's answers", () => {
  it('gives the model an isError result as Error: <its text>, failing the call tool_error at once, without retries', async () => {
    const model = scriptedProvider([
      toolCalls([
        { name: 'answering_lookup', args: { city: 'Atlantis' }, id: 'unknown' },
        { name: 'answering_lookup', args: { city: 'Oslo' }, id: 'known' },
      ]),
      reply('done'),
    ]);
    const logger = capturingLogger();
    const run = await runLocal(new Agent({ name: 'mcp-answers', tools: [answering] }), 'go', { provider: model, logger });
    expect(run.status).toBe('completed');
    const messages = Object.fromEntries(model.requests[1]!.messages.filter((message) => message.role === 'tool').map((message) => [message.tool_call_id, message.content]));
    // One call each: the server counted two calls in all, whatever the tool's retries.
    expect(Object.values(messages).sort()).toEqual(['Error: no city named Atlantis (call 1)', 'Oslo is mild (call 2)'].sort());
    expect(run.events.filter((event) => event.kind === 'ToolCallStarted' && event.tool_call_id === 'unknown')).toHaveLength(1);
    expect(run.events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_call_id: 'unknown', error_code: 'tool_error' });
    // What the server said reaches the model only: not the events, not the log.
    expect(JSON.stringify(run.events)).not.toContain('Atlantis');
    expect(logger.lines.join('\n')).not.toContain('Atlantis');
    expect(logger.lines.some((line) => line.includes('MCP tool answered isError'))).toBe(true);
  });

  it('leaves out, with a warning naming it, a tool whose schema cannot be compiled, and starts with the rest', async () => {
    const logger = capturingLogger();
    const model = scriptedProvider([reply('done')]);
    const run = await runLocal(new Agent({ name: 'mcp-schemas', tools: [answering] }), 'go', { provider: model, logger });
    expect(run.status).toBe('completed');
    expect(model.requests[0]!.tools.map((tool) => tool.name)).toEqual(['answering_lookup']);
    const warning = logger.lines.find((line) => line.includes('is not served'));
    expect(warning).toContain("MCP tool 'broken' of server 'answering' is not served: its input schema cannot be compiled");
    expect(warning).toContain('"mcp_server":"answering","tool":"broken"');
  });
});
