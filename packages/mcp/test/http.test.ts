import { type ChildProcess, spawn } from 'node:child_process';
import { Agent, type ToolContext, openToolSources, runLocal } from '@arcflow/core';
import { mcpTools } from '@arcflow/mcp';
import { capturingLogger, freePort, reply, scriptedProvider, toolCalls } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVERYTHING_BIN } from './everything.ts';

let server: ChildProcess;
let port: number;
let url: string;

beforeAll(async () => {
  port = await freePort();
  server = await startServer(port);
  url = `http://127.0.0.1:${port}/mcp`;
});

afterAll(() => {
  server?.kill();
});

/** server-everything's own streamable HTTP mode (a third-party server), on a port of ours. */
async function startServer(port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [EVERYTHING_BIN, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let stderr = '';
    const timer = setTimeout(() => reject(new Error(`server-everything did not listen in time: ${stderr}`)), 20_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes(`listening on port ${port}`)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return child;
}

describe('mcpTools over streamable HTTP (server-everything streamableHttp)', () => {
  it("lists the server's tools and runs calls over it, checked against the server's schemas", async () => {
    const remote = mcpTools({ server: 'remote', transport: { type: 'http', url, headers: { 'x-arcflow-test': '1' } }, include: ['echo', 'get-sum'], prefix: 'r_' });
    const model = scriptedProvider([
      toolCalls([
        { name: 'r_get-sum', args: { a: 40, b: 2 }, id: 'sum' },
        { name: 'r_echo', args: { message: 'over http' }, id: 'echo' },
        { name: 'r_echo', args: {}, id: 'bad' },
      ]),
      reply('done'),
    ]);
    const run = await runLocal(new Agent({ name: 'mcp-http', tools: [remote] }), 'go', { provider: model, logger: false });
    expect(run.status).toBe('completed');
    expect(model.requests[0]?.tools.map((entry) => entry.name)).toEqual(['r_echo', 'r_get-sum']);
    const results = Object.fromEntries((model.requests[1]?.messages ?? []).filter((message) => message.role === 'tool').map((message) => [message.tool_call_id, message.content]));
    expect(results).toEqual({ sum: 'The sum of 40 and 2 is 42.', echo: 'Echo: over http', bad: 'Error: invalid arguments — message: required' });
  });

  it('connects again after the server restarted: the call that finds its session gone fails, the next one runs', async () => {
    const remote = mcpTools({ server: 'restarting', transport: { type: 'http', url }, include: ['get-sum'] });
    const logger = capturingLogger();
    const opened = await openToolSources([new Agent({ name: 'mcp-restart', tools: [remote] })], { logger });
    try {
      const sum = (opened.definitions[0] as Agent).findTool('restarting_get-sum')!;
      const call = (a: number) => sum.handler!({ a, b: 1 }, { signal: new AbortController().signal } as ToolContext);
      expect(await call(1)).toBe('The sum of 1 and 1 is 2.');
      server.kill();
      await new Promise((resolve) => server.once('exit', resolve));
      server = await startServer(port);
      await expect(call(2)).rejects.toThrow();
      expect(await call(3)).toBe('The sum of 3 and 1 is 4.');
      expect(logger.lines.filter((line) => line.startsWith('MCP server connected'))).toHaveLength(2);
    } finally {
      await opened.close();
    }
  });
});
