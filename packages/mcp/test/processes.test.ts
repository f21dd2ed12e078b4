import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import type { TraceEvent } from '@arcflow/core';
import { type ArcflowClient, createClient } from '@arcflow/queue';
import { cleanupPrefix, type FakeOpenAIServer, freePort, startFakeOpenAI, TEST_REDIS_URL, testPrefix } from '@arcflow/testing';
import { ARCFLOW_BIN, type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plan, plannedModel } from './model.ts';

const run = promisify(execFile);
const fixture = (name: string) => new URL(`./fixtures/${name}.ts`, import.meta.url).pathname;
const prefix = testPrefix('mcp-processes');
let model: FakeOpenAIServer;
let client: ArcflowClient;
const workers: WorkerProcess[] = [];
const env = () => ({ REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: 'k', OPENAI_BASE_URL: model.url });
const start = async () => {
  const worker = await spawnWorker(fixture('everything-agent'), { env: env() });
  workers.push(worker);
  return worker;
};

beforeAll(async () => {
  model = await startFakeOpenAI({ fallback: plannedModel });
  client = createClient({ redis: TEST_REDIS_URL, prefix });
});

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.stop()));
  await client?.close();
  await model?.close();
  await cleanupPrefix(prefix);
});

async function eventsOf(run_id: string): Promise<TraceEvent[]> {
  const events: TraceEvent[] = [];
  for await (const event of client.events(run_id)) events.push(event);
  return events;
}

/** The process ids of `pid`'s children (Linux /proc). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        return (
          readFileSync(`/proc/${entry}/stat`, 'utf8')
            .replace(/^.*\) /, '')
            .split(' ')[1] === String(pid)
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** `arcflow worker --module <fixture>` run to its end: it should refuse to start. */
async function refusedStart(name: string, extra: Record<string, string> = {}): Promise<{ code: number; stderr: string }> {
  return run(process.execPath, [ARCFLOW_BIN, 'worker', '--module', fixture(name)], { env: { ...process.env, ...env(), ...extra }, timeout: 30_000 }).then(
    () => ({ code: 0, stderr: '' }),
    (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
  );
}

describe('MCP tools in worker processes (server-everything over stdio)', () => {
  it("registers the server's tools and runs a call as a tool job; a bad argument goes back to the model and never reaches the server", async () => {
    await start();
    const agents = await client.agents();
    expect(agents.find((agent) => agent.name === 'mcp-agent')?.tools).toEqual(['everything_echo', 'everything_get-sum', 'everything_trigger-long-running-operation']);
    const { run_id } = await client.enqueue({
      agent: 'mcp-agent',
      input: plan([
        ['everything_get-sum', { a: 2, b: 3 }],
        ['everything_echo', { message: 7 }],
        ['everything_echo', { message: 'hi' }],
      ]),
    });
    const record = await client.wait(run_id, { timeout_ms: 30_000 });
    expect(record.status).toBe('completed');
    expect(JSON.parse(record.output ?? '')).toEqual(['The sum of 2 and 3 is 5.', 'Error: invalid arguments — message: expected string', 'Echo: hi']);
    const events = await eventsOf(run_id);
    expect(events.filter((event) => event.kind === 'ToolInputValidationFailed')).toMatchObject([
      { tool_name: 'everything_echo', violation_description: 'message: expected string' },
    ]);
    expect(events.filter((event) => event.kind === 'ToolCallCompleted').map((event) => (event as { tool_name: string }).tool_name)).toEqual(
      expect.arrayContaining(['everything_get-sum', 'everything_echo']),
    );
    // What the model was offered: the server's schema as the tool's parameters.
    const request = model.requests[0]!;
    expect(request.body.tools.find((entry: { function: { name: string } }) => entry.function.name === 'everything_get-sum').function.parameters).toMatchObject({
      type: 'object',
      required: ['a', 'b'],
    });
  });

  it('holds concurrency: 1 across two worker processes (no two calls of the capped tool overlap)', async () => {
    while (workers.length < 2) await start();
    const runs = await Promise.all(
      Array.from({ length: 4 }, () => client.enqueue({ agent: 'mcp-agent', input: plan([['everything_trigger-long-running-operation', { duration: 1, steps: 1 }]]) })),
    );
    const records = await Promise.all(runs.map(({ run_id }) => client.wait(run_id, { timeout_ms: 60_000 })));
    expect(records.map((record) => JSON.parse(record.output ?? ''))).toEqual(Array(4).fill(['Long running operation completed. Duration: 1 seconds, Steps: 1.']));
    const spans = await Promise.all(
      runs.map(async ({ run_id }) => {
        const events = await eventsOf(run_id);
        return { from: events.find((event) => event.kind === 'ToolCallStarted')!.ts, to: events.find((event) => event.kind === 'ToolCallCompleted')!.ts };
      }),
    );
    spans.sort((a, b) => a.from - b.from);
    for (let index = 1; index < spans.length; index += 1) expect(spans[index]!.from).toBeGreaterThanOrEqual(spans[index - 1]!.to);
    expect(spans.at(-1)!.to - spans[0]!.from).toBeGreaterThanOrEqual(3_900);
  });

  it('answers a call whose server is killed mid-call as tool_error; the run goes on and the next call reconnects', async () => {
    const worker = workers[0]!;
    const { run_id } = await client.enqueue({
      agent: 'mcp-agent',
      input: plan([['everything_trigger-long-running-operation', { duration: 20, steps: 20 }]], [['everything_get-sum', { a: 1, b: 1 }]]),
    });
    // Wait until the long call has started: then its server is the child to kill. Either worker may hold it.
    for (let tries = 0; tries < 200; tries += 1) {
      if ((await eventsOf(run_id)).some((event) => event.kind === 'ToolCallStarted')) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const killed = workers.flatMap((each) => childrenOf(each.pid));
    expect(killed.length).toBeGreaterThanOrEqual(2);
    for (const pid of killed) process.kill(pid, 'SIGKILL');
    const record = await client.wait(run_id, { timeout_ms: 30_000 });
    expect(record.status).toBe('completed');
    expect(JSON.parse(record.output ?? '')).toEqual(['Error: tool temporarily unavailable', 'The sum of 1 and 1 is 2.']);
    const events = await eventsOf(run_id);
    expect(events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_name: 'everything_trigger-long-running-operation', error_code: 'tool_error' });
    // The worker that ran the next call started a new server process.
    const now = workers.flatMap((each) => childrenOf(each.pid));
    expect(now.some((pid) => !killed.includes(pid))).toBe(true);
    expect(worker.stderr()).toContain('MCP server connection closed');
  });

  it('stops its MCP servers when it drains on SIGTERM', async () => {
    // A worker whose server was killed by the test before starts a new one only at its next call: take one that holds a server.
    const holding = workers.findIndex((each) => childrenOf(each.pid).length > 0);
    expect(holding).toBeGreaterThanOrEqual(0);
    const [worker] = workers.splice(holding, 1) as [(typeof workers)[number]];
    const servers = childrenOf(worker.pid);
    expect(await worker.stop()).toBe(0);
    for (let tries = 0; tries < 40 && servers.some((pid) => existsSync(`/proc/${pid}`)); tries += 1) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(servers.filter((pid) => existsSync(`/proc/${pid}`))).toEqual([]);
  });

  it('shows a server whose tool list changed between two workers as DefinitionChanged (mixed fleets)', async () => {
    const before = await spawnWorker(fixture('fleet-agent'), { env: { ...env(), MCP_INCLUDE: 'echo' } });
    expect(await before.stop()).toBe(0);
    // Enqueued while only the first worker's registration is known: the run records its hash.
    const { run_id } = await client.enqueue({ agent: 'mcp-fleet', input: plan([['everything_echo', { message: 'still here' }]]) });
    workers.push(await spawnWorker(fixture('fleet-agent'), { env: { ...env(), MCP_INCLUDE: 'echo,get-sum' } }));
    const record = await client.wait(run_id, { timeout_ms: 30_000 });
    expect(JSON.parse(record.output ?? '')).toEqual(['Echo: still here']);
    const changed = (await eventsOf(run_id)).filter((event) => event.kind === 'DefinitionChanged') as { previous_hash: string; current_hash: string }[];
    expect(changed).toHaveLength(1);
    expect(changed[0]!.previous_hash).not.toBe(changed[0]!.current_hash);
    const registration = (await client.agents()).find((agent) => agent.name === 'mcp-fleet');
    expect(registration?.tools).toEqual(['everything_echo', 'everything_get-sum']);
  });

  it("serves docs/mcp.md's example module (examples/mcp/everything-agent.ts) as the docs show it", async () => {
    const example = new URL('../../../examples/mcp/everything-agent.ts', import.meta.url).pathname;
    workers.push(await spawnWorker(example, { env: env() }));
    const exec_config = {
      test: {
        steps: {
          s1: {
            responses: [
              {
                tool_calls: [
                  { name: 'everything_get-sum', arguments: { a: 2, b: 3 } },
                  { name: 'everything_echo', arguments: { message: 42 } },
                ],
              },
              { output: '2 + 3 is 5.' },
            ],
          },
        },
      },
    };
    const { run_id } = await client.enqueue({ agent: 'mcp-demo', input: 'What is 2 + 3?', exec_config });
    expect(await client.wait(run_id, { timeout_ms: 30_000 })).toMatchObject({ status: 'completed', output: '2 + 3 is 5.' });
    const events = await eventsOf(run_id);
    expect(events.find((event) => event.kind === 'ToolCallCompleted')).toMatchObject({ tool_name: 'everything_get-sum', output_size_bytes: 24 });
    expect(events.find((event) => event.kind === 'ToolInputValidationFailed')).toMatchObject({ tool_name: 'everything_echo', violation_description: 'message: expected string' });
  });

  it('refuses to start, in one line and exit 1, a worker whose stdio server cannot be started', async () => {
    const refused = await refusedStart('unreachable-stdio');
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe("arcflow: MCP server 'ghost' cannot be reached (stdio: /nonexistent/arcflow-mcp-server): spawn /nonexistent/arcflow-mcp-server ENOENT");
  });

  it('refuses to start, in one line and exit 1, a worker whose streamable HTTP server does not answer, naming the cause', async () => {
    const port = await freePort();
    const refused = await refusedStart('unreachable-http', { MCP_URL: `http://127.0.0.1:${port}/mcp` });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    // Not a bare `fetch failed`: the connection's own failure follows it.
    expect(refused.stderr.trim()).toMatch(
      new RegExp(`^arcflow: MCP server 'remote' cannot be reached \\(http: http://127\\.0\\.0\\.1:${port}/mcp\\): fetch failed: .*ECONNREFUSED`),
    );
  });

  it('refuses to start a worker without the MCP SDK installed by naming the package to install, not as a server that cannot be reached', async () => {
    const withoutSdk = fileURLToPath(new URL('./fixtures/without-sdk.mjs', import.meta.url));
    const refused = await refusedStart('unreachable-stdio', { NODE_OPTIONS: `--import ${withoutSdk}` });
    expect(refused).toMatchObject({
      code: 1,
      stderr: 'arcflow: mcpTools needs the package @modelcontextprotocol/sdk (1.32 or later): npm install @modelcontextprotocol/sdk\n',
    });
  });
});
