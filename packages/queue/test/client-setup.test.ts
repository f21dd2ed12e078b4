import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, ConfigError } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, capturingLogger, cleanupPrefix, scriptedProvider, reply, testPrefix } from '@arcflow/testing';
import { ARCFLOW_BIN } from '@arcflow/worker';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FAST, until } from './harness.ts';

// What a first hour with the client runs into (SPEC §5): the environment the CLI reads, where an
// unknown run was looked for, and a Redis URL that is wrong or names nothing that answers.

const prefixes: string[] = [];
const saved = { REDIS_URL: process.env.REDIS_URL, ARCFLOW_PREFIX: process.env.ARCFLOW_PREFIX };
afterEach(() => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});
afterAll(async () => {
  for (const prefix of prefixes) await cleanupPrefix(prefix);
});

describe('createClient() and the environment', () => {
  it('reads ARCFLOW_PREFIX and REDIS_URL when given neither, and names the prefix of an unknown run', async () => {
    const prefix = testPrefix('client-env');
    prefixes.push(prefix);
    const worker = await startWorker({
      agents: [new Agent({ name: 'env_agent' })],
      provider: scriptedProvider([reply('from the env prefix')], { repeat: true }),
      redis: TEST_REDIS_URL,
      prefix,
      logger: capturingLogger(),
      ...FAST,
    });
    process.env.REDIS_URL = TEST_REDIS_URL;
    process.env.ARCFLOW_PREFIX = prefix;
    const client = createClient();
    try {
      const { run_id } = await client.enqueue({ agent: 'env_agent', input: 'hi' });
      expect(await client.wait(run_id, { timeout_ms: 10_000 })).toMatchObject({ status: 'completed', output: 'from the env prefix' });
      await expect(client.cancel('run_not_there')).rejects.toThrow(`unknown run 'run_not_there' (looked under prefix '${prefix}')`);
      await expect(client.wait('run_not_there')).rejects.toThrow(`looked under prefix '${prefix}'`);
      // Every read says so, its conversation and its stream too, and its events without follow.
      const said = `unknown run 'run_not_there' (looked under prefix '${prefix}')`;
      await expect(client.messages('run_not_there')).rejects.toThrow(said);
      const drain = async (iterable: AsyncIterable<unknown>) => {
        for await (const _ of iterable);
      };
      await expect(drain(client.stream('run_not_there'))).rejects.toThrow(said);
      await expect(drain(client.events('run_not_there'))).rejects.toThrow(said);
    } finally {
      await client.close();
      await worker.close();
    }
    process.env.REDIS_URL = 'redis://127.0.0.1:1';
    const unreachable = createClient();
    await expect(unreachable.get('run_abc')).rejects.toThrow('cannot reach Redis at redis://127.0.0.1:1');
    await unreachable.close();
  });
});

describe('enqueue refusals', () => {
  it('refuses a repeated idempotency key with another request, an unknown option, and a test script for a step there is not, queueing nothing', async () => {
    const prefix = testPrefix('client-refusals');
    prefixes.push(prefix);
    const provider = scriptedProvider([reply('answered')], { repeat: true });
    const worker = await startWorker({
      agents: [new Agent({ name: 'keyed' }), new Agent({ name: 'other' })],
      provider,
      redis: TEST_REDIS_URL,
      prefix,
      logger: capturingLogger(),
      ...FAST,
    });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      const first = await client.enqueue({ agent: 'keyed', input: 'hi', idempotency_key: 'order-123' });
      expect(await client.enqueue({ agent: 'keyed', input: 'hi', idempotency_key: 'order-123' })).toEqual({ run_id: first.run_id, created: false });
      // An empty config or exec_config asks for what none does.
      expect(await client.enqueue({ agent: 'keyed', input: 'hi', config: {}, exec_config: {}, idempotency_key: 'order-123' })).toEqual({ run_id: first.run_id, created: false });
      for (const other of [
        { agent: 'keyed', input: 'another input' },
        { agent: 'other', input: 'hi' },
        { agent: 'keyed', input: 'hi', config: { tool_execution: { max_iterations: 2 } } },
        { agent: 'keyed', input: 'hi', state: { plan: 'b' } },
      ]) {
        await expect(client.enqueue({ ...other, idempotency_key: 'order-123' })).rejects.toMatchObject({
          code: 'idempotency_conflict',
          message: `idempotency_key 'order-123' was used for another request (run '${first.run_id}'): a repeat must have the same agent, input, config, exec_config, thread_id and state; use a new key for a new request`,
        });
      }
      await expect(client.enqueue({ agent: 'keyed', input: 'hi', threadId: 'user-1:chat' } as never)).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringContaining("unknown enqueue option 'threadId'; did you mean 'thread_id'?"),
      });
      await expect(client.enqueue({ agent: 'keyed', input: 'hi', exec_config: { tset: {} } })).rejects.toThrow("exec_config has unknown key 'tset'; did you mean 'test'?");
      await expect(client.enqueue({ agent: 'keyed', input: 'hi', exec_config: { test: { steps: { s2: { output: 'x' } } } } })).rejects.toThrow(
        "exec_config.test.steps.s2: agent 'keyed' has no step 's2'; did you mean 's1'? (steps: s1)",
      );
      expect((await client.list()).runs.map((run) => run.run_id)).toEqual([first.run_id]);
      expect(await client.wait(first.run_id, { timeout_ms: 10_000 })).toMatchObject({ status: 'completed', output: 'answered' });
      expect(provider.requests).toHaveLength(1);
    } finally {
      await client.close();
      await worker.close();
    }
  });
});

describe('client options that are wrong', () => {
  it('refuses an unknown option, naming the nearest, and a bad redis_timeout_ms, before connecting: the process still exits', async () => {
    expect(() => createClient({ url: 'redis://127.0.0.1:6390' } as never)).toThrow("unknown option 'url' in the client options; did you mean 'redis'?");
    expect(() => createClient({ prefx: 'x' } as never)).toThrow("unknown option 'prefx' in the client options; did you mean 'prefix'?");
    // In a process of its own: a refused client that had connected would keep it from exiting.
    const script = "import { createClient } from '@arcflow/queue'; try { createClient({ redis_timeout_ms: 0 }); } catch (error) { console.log(error.message); }";
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: new URL('../../../', import.meta.url).pathname,
      env: { ...process.env, REDIS_URL: TEST_REDIS_URL },
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      child.once('exit', (exit) => {
        clearTimeout(timer);
        resolve(exit);
      });
    });
    expect(out).toBe('redis_timeout_ms must be an integer >= 1, got 0\n');
    expect(code).toBe(0);
  });
});

describe('a Redis URL that is wrong', () => {
  it('refuses another scheme at once, naming the schemes expected', () => {
    for (const url of ['http://127.0.0.1:6379', 'https://user:pw@cache.example:6380', 'redis://a:6379,http://b:6379']) {
      expect(() => createClient({ redis: url })).toThrow(ConfigError);
    }
    expect(() => createClient({ redis: 'http://user:hunter2@127.0.0.1:6379' })).toThrow(
      "the Redis URL http://user:***@127.0.0.1:6379 has the scheme 'http:'; expected redis://host:port, rediss://host:port (TLS), or a unix socket's path",
    );
  });

  it("says what answered when something that is not Redis listens there, never the driver's own message", async () => {
    const http = createServer((_request, response) => response.end('hello'));
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const { port } = http.address() as AddressInfo;
    const client = createClient({ redis: `redis://127.0.0.1:${port}`, redis_timeout_ms: 1_500 });
    try {
      const failure = (await client.get('run_abc').catch((error: unknown) => error)) as Error & { code: string };
      expect(failure.code).toBe('redis_unavailable');
      expect(failure.message).toMatch(new RegExp(`^cannot reach Redis at redis://127\\.0\\.0\\.1:${port} \\(something that is not Redis answered\\) after 1500 ms$`));
      expect(failure.message).not.toMatch(/Protocol error|Stream isn't writeable|enableOfflineQueue|Please report/);
    } finally {
      await client.close();
      await new Promise((resolve) => http.close(resolve));
    }
  }, 15_000);

  it('fails a call at once, naming host and port, when nothing listens there (not after its timeout)', async () => {
    const client = createClient({ redis: 'redis://127.0.0.1:1', redis_timeout_ms: 600_000 });
    const failure = await client.get('run_abc').catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: 'redis_unavailable', message: 'cannot reach Redis at redis://127.0.0.1:1 (ECONNREFUSED at 127.0.0.1:1)' });
    await client.close();
  }, 15_000);

  it('keeps a worker saying, with the address, that it cannot reach Redis, while it retries', async () => {
    const fixture = new URL('./fixtures/clash-a.ts', import.meta.url).pathname;
    const child = spawn(process.execPath, [ARCFLOW_BIN, 'worker', '--module', fixture], {
      env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1', ARCFLOW_PREFIX: 'never-reached' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await until(async () => stderr.includes('still cannot reach Redis'), 90_000, 200);
      const lines = stderr.split('\n').filter((line) => line.includes('Redis at redis://127.0.0.1:1'));
      expect(lines[0]).toContain('waiting for Redis at redis://127.0.0.1:1 (ECONNREFUSED at 127.0.0.1:1)');
      expect(lines.at(-1)).toMatch(/still cannot reach Redis at redis:\/\/127\.0\.0\.1:1 \(ECONNREFUSED at 127\.0\.0\.1:1\) after \d+ s; retrying/);
      expect(child.exitCode).toBeNull();
    } finally {
      child.kill('SIGKILL');
    }
  }, 120_000);
});
