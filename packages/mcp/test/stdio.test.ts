import { Agent, type ToolDefinition, openToolSources, runLocal } from '@arcflow/core';
import { mcpTools } from '@arcflow/mcp';
import { capturingLogger, reply, scriptedProvider, toolCalls } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { everythingStdio } from './everything.ts';

const everything = mcpTools({ server: 'everything', transport: everythingStdio, max_result_bytes: 512 });

/** The tool messages the model received in its request `index`, by tool call id. */
const toolMessages = (model: ReturnType<typeof scriptedProvider>, index: number) =>
  Object.fromEntries((model.requests[index]?.messages ?? []).filter((message) => message.role === 'tool').map((message) => [message.tool_call_id, message.content]));

describe('mcpTools over stdio (server-everything, in process)', () => {
  it("lists the server's tools once opened, each named <server>_<tool> with the server's input schema compiled as its schema", async () => {
    const agent = new Agent({ name: 'mcp-list', tools: [everything] });
    expect(agent.tools).toEqual([]);
    expect(agent.tool_sources).toEqual([everything]);
    const opened = await openToolSources([agent], { logger: capturingLogger() });
    try {
      const served = opened.definitions[0] as Agent;
      const names = served.tools.map((tool) => tool.name);
      expect(names).toEqual(expect.arrayContaining(['everything_echo', 'everything_get-sum', 'everything_trigger-long-running-operation']));
      const sum = served.findTool('everything_get-sum') as ToolDefinition;
      expect(sum.input_schema).toMatchObject({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] });
      expect(sum.description).toBe('Returns the sum of two numbers');
      expect(sum.check({ a: 1, b: 2 })).toBeUndefined();
      expect(sum.check({ a: 'one', b: 2 })).toBe('a: expected number');
      expect(sum.max_result_bytes).toBe(512);
      // The opened agent's definition hash covers the listed tools: it is not the unopened agent's.
      expect(served.definition_hash).not.toBe(agent.definition_hash);
    } finally {
      await opened.close();
    }
  });

  it('runs a valid call on the server; a call that fails the schema goes back to the model as invalid arguments', async () => {
    const model = scriptedProvider([
      toolCalls([
        { name: 'everything_get-sum', args: { a: 2, b: 3 }, id: 'sum' },
        { name: 'everything_echo', args: { message: 7 }, id: 'bad' },
      ]),
      reply('done'),
    ]);
    const run = await runLocal(new Agent({ name: 'mcp-run', tools: [everything] }), 'add', { provider: model, logger: false });
    expect(run.status).toBe('completed');
    expect(toolMessages(model, 1)).toEqual({ sum: 'The sum of 2 and 3 is 5.', bad: 'Error: invalid arguments — message: expected string' });
    expect(run.events.filter((event) => event.kind === 'ToolInputValidationFailed')).toMatchObject([
      { tool_name: 'everything_echo', violation_description: 'message: expected string' },
    ]);
    expect(run.events.filter((event) => event.kind === 'ToolCallCompleted')).toMatchObject([{ tool_name: 'everything_get-sum' }]);
  });

  it('gives other content as JSON, cuts a result to max_result_bytes, and gives an isError result to the model as its answer, failing tool_error with nothing of it in events', async () => {
    const model = scriptedProvider([
      toolCalls([
        { name: 'everything_get-tiny-image', args: {}, id: 'image' },
        { name: 'everything_gzip-file-as-resource', args: { data: 'http://127.0.0.1:1/nothing-here' }, id: 'failing' },
      ]),
      reply('done'),
    ]);
    const logger = capturingLogger();
    const run = await runLocal(new Agent({ name: 'mcp-content', tools: [everything] }), 'go', { provider: model, logger });
    expect(run.status).toBe('completed');
    const messages = toolMessages(model, 1);
    expect(messages.image).toMatch(/^Here's the image you requested:\n\{"type":"image","data":"iVBOR/);
    expect(messages.image).toMatch(/\[result truncated: \d+ of \d+ bytes cut\]$/);
    expect(messages.failing).toBe('Error: fetch failed');
    expect(run.events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_name: 'everything_gzip-file-as-resource', error_code: 'tool_error' });
    expect(JSON.stringify(run.events)).not.toContain('127.0.0.1:1');
    expect(logger.lines.some((line) => line.includes('MCP tool answered isError') && line.includes('"tool":"everything_gzip-file-as-resource"'))).toBe(true);
  });

  it('aborts the MCP request when the call times out', async () => {
    const slow = mcpTools({ server: 'slow', transport: everythingStdio, include: ['trigger-long-running-operation'], timeout_ms: 300 });
    // An operation of 30 s: a run that waited for it (the request not aborted) would take that long.
    const model = scriptedProvider([toolCalls([{ name: 'slow_trigger-long-running-operation', args: { duration: 30, steps: 1 }, id: 'long' }]), reply('done')]);
    // The server started first, so that the time below is the run's alone, however slowly a loaded machine starts it.
    const opened = await openToolSources([new Agent({ name: 'mcp-timeout', tools: [slow] })], { logger: capturingLogger() });
    try {
      const started = Date.now();
      const run = await runLocal(opened.definitions[0] as Agent, 'go', { provider: model, logger: false });
      expect(run.status).toBe('completed');
      expect(toolMessages(model, 1)).toEqual({ long: 'Error: tool timed out — try again or use a different approach' });
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await opened.close();
    }
  });

  it('asks for approval before a call with needs_approval runs; a rejected call gets the reason and the others run', async () => {
    const guarded = mcpTools({ server: 'guarded', transport: everythingStdio, include: ['echo', 'get-sum'], tools: { echo: { needs_approval: true } } });
    const model = scriptedProvider([
      toolCalls([
        { name: 'guarded_echo', args: { message: 'yes' }, id: 'approved' },
        { name: 'guarded_echo', args: { message: 'no' }, id: 'rejected' },
        { name: 'guarded_get-sum', args: { a: 1, b: 2 }, id: 'free' },
      ]),
      reply('done'),
    ]);
    const asked: string[] = [];
    const run = await runLocal(new Agent({ name: 'mcp-approval', tools: [guarded] }), 'go', {
      provider: model,
      logger: false,
      approve: (request) => {
        asked.push(request.tool_call_id);
        return request.tool_call_id === 'approved' ? { approved: true } : { approved: false, reason: 'not this one' };
      },
    });
    expect(run.status).toBe('completed');
    expect(asked.sort()).toEqual(['approved', 'rejected']);
    expect(toolMessages(model, 1)).toEqual({ approved: 'Echo: yes', rejected: 'Error: the user rejected this call — not this one', free: 'The sum of 1 and 2 is 3.' });
  });

  it('retries a call whose server was killed under it, on a new connection', async () => {
    const logger = capturingLogger();
    const serverPids = () => logger.lines.filter((line) => line.startsWith('MCP server connected')).map((line) => JSON.parse(line.slice(line.indexOf('{'))).server_pid as number);
    const retried = mcpTools({ server: 'retried', transport: everythingStdio, include: ['trigger-long-running-operation'], retries: 1 });
    const model = scriptedProvider([toolCalls([{ name: 'retried_trigger-long-running-operation', args: { duration: 1.5, steps: 3 }, id: 'long' }]), reply('done')]);
    const running = runLocal(new Agent({ name: 'mcp-retry', tools: [retried] }), 'go', {
      provider: model,
      logger,
      tool_retry_backoff_ms: 10,
      onEvent: (event) => {
        // The first attempt is under way: its server goes.
        if (event.kind === 'ToolCallStarted' && event.attempt === 1) setTimeout(() => process.kill(serverPids()[0]!, 'SIGKILL'), 200);
      },
    });
    const run = await running;
    expect(run.status).toBe('completed');
    expect(toolMessages(model, 1)).toEqual({ long: 'Long running operation completed. Duration: 1.5 seconds, Steps: 3.' });
    expect(run.events.filter((event) => event.kind === 'ToolCallStarted').map((event) => (event as { attempt: number }).attempt)).toEqual([1, 2]);
    expect(new Set(serverPids()).size).toBe(2);
  });

  it('shares one client between two mcpTools values of one server, and refuses one server name with two transports', async () => {
    const echoOnly = mcpTools({ server: 'everything', transport: everythingStdio, include: ['echo'], prefix: 'a_' });
    const sumOnly = mcpTools({ server: 'everything', transport: everythingStdio, include: ['get-sum'], prefix: 'b_' });
    const logger = capturingLogger();
    const opened = await openToolSources([new Agent({ name: 'mcp-shared', tools: [echoOnly, sumOnly] })], { logger });
    await opened.close();
    expect((opened.definitions[0] as Agent).tools.map((tool) => tool.name)).toEqual(['a_echo', 'b_get-sum']);
    expect(logger.lines.filter((line) => line.startsWith('MCP server connected'))).toHaveLength(1);
    const elsewhere = mcpTools({ server: 'everything', transport: { ...everythingStdio, cwd: '/' } });
    await expect(openToolSources([new Agent({ name: 'mcp-two-ways', tools: [everything, elsewhere] })], { logger: capturingLogger() })).rejects.toThrow(
      "MCP server 'everything' is given two different transports; use one mcpTools(…) value per server, or another server name",
    );
  });

  it('refuses a start whose server exits, with the last line it wrote on stderr', async () => {
    const exiting = mcpTools({ server: 'exiting', transport: { type: 'stdio', command: process.execPath, args: ['-e', "console.error('no API token set'); process.exit(2)"] } });
    const refused = runLocal(new Agent({ name: 'mcp-exiting', tools: [exiting] }), 'x', { provider: scriptedProvider([reply('x')]), logger: false });
    await expect(refused).rejects.toThrow(/^MCP server 'exiting' cannot be reached \(stdio: .*\): .+ \(its last stderr line: no API token set\)$/);
  });

  it('refuses, naming the server, a start whose include names a tool the server does not list', async () => {
    const typo = mcpTools({ server: 'everything', transport: everythingStdio, include: ['get_sum'] });
    await expect(runLocal(new Agent({ name: 'mcp-typo', tools: [typo] }), 'x', { provider: scriptedProvider([reply('x')]), logger: false })).rejects.toThrow(
      "mcpTools 'everything': include names 'get_sum', a tool the server does not list; did you mean 'get-sum'?",
    );
  });
});
