import { Agent, ConfigError, type ModelProvider, type TraceEvent, Workflow, silentLogger, tool } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { QueueName, type WorkerOptions, createClient, keysFor, startWorker } from '@arcflow/queue';
import { Queue } from 'bullmq';
import { type FakeOpenAIOptions, type FakeOpenAIServer, TEST_REDIS_URL, assertEventInvariants, capturingLogger, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { StoredFormatError, readResponse, writeResponse } from '../src/records/formats.ts';
import { FAST, collect, testResources, until } from './harness.ts';
import { uncompacted } from './uncompact.ts';

// SPEC §16 through the BullMQ engine: model settings on the wire, named providers, fallbacks, and
// a 429 that pauses only the provider that sent it. Real Redis, real BullMQ, fake OpenAI servers.

const { prefixes, open, redis } = testResources();

const noop = tool({ name: 'noop', description: 'does nothing', input_schema: { type: 'object' }, handler: async () => 'nothing' });

async function server(options: FakeOpenAIOptions = {}): Promise<FakeOpenAIServer> {
  const started = await startFakeOpenAI(options);
  open.push(started);
  return started;
}

const openai = (fake: FakeOpenAIServer, id: string, model = `${id}-default`): ModelProvider => openaiProvider({ base_url: fake.url, api_key: 'k', id, model });

async function engine(name: string, options: Omit<WorkerOptions, 'redis' | 'prefix'>) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const worker = await startWorker({ redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST, ...options });
  open.push(worker);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  const run = async (agent: string, config?: unknown) => {
    const { run_id } = await client.enqueue({ agent, input: 'go', ...(config === undefined ? {} : { config }) });
    const record = await client.wait(run_id, { timeout_ms: 20_000 });
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    return { run_id, record, events };
  };
  return { prefix, client, run };
}

const ofKind = <K extends TraceEvent['kind']>(events: TraceEvent[], kind: K) => events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);

describe('model settings through a worker', () => {
  /** The settings whose wire name is their own (every one but extra_body, whose keys are merged in). */
  const sameNamed = {
    temperature: 0.2,
    top_p: 0.9,
    max_tokens: 64,
    stop: ['END'],
    seed: 7,
    frequency_penalty: 0.5,
    presence_penalty: -0.5,
    parallel_tool_calls: false,
    tool_choice: 'auto',
    reasoning_effort: 'low',
  } as const;
  const settings = { ...sameNamed, extra_body: { top_k: 40 } } as const;

  it("sends every setting under its wire name, and a run's config.model_settings over the agent's, key by key; events carry none of them", async () => {
    const fake = await server({ fallback: () => ({ type: 'text', content: 'ok' }) });
    const { run } = await engine('settings-wire', { agents: [new Agent({ name: 'tuned', tools: [noop], model_settings: settings })], provider: openai(fake, 'local') });
    const plain = await run('tuned');
    expect(plain.record.status).toBe('completed');
    // Not OpenAI's own host, so max_tokens goes as max_tokens; extra_body's keys are merged in.
    expect(fake.requests[0]!.body).toMatchObject({ ...sameNamed, top_k: 40 });
    const overridden = await run('tuned', { model_settings: { temperature: 1.5, seed: 9 } });
    expect(overridden.record.status).toBe('completed');
    expect(fake.requests[1]!.body).toMatchObject({ temperature: 1.5, seed: 9, top_p: 0.9, max_tokens: 64, top_k: 40 });
    // Settings never appear in events (SPEC §16).
    const logged = JSON.stringify([...plain.events, ...overridden.events]);
    for (const key of ['temperature', 'top_p', 'max_tokens', 'top_k', 'seed', 'reasoning_effort', 'END']) expect(logged).not.toContain(key);
  });

  it("sends tool_choice 'required' on a step's first call and 'auto' after it, so the run ends; a named choice goes in the function form", async () => {
    const fake = await server({
      turns: [
        { type: 'tools', calls: [{ name: 'noop', arguments: {} }] },
        { type: 'text', content: 'done' },
        { type: 'tools', calls: [{ name: 'noop', arguments: {} }] },
        { type: 'text', content: 'done again' },
      ],
    });
    const { run } = await engine('tool-choice', {
      agents: [new Agent({ name: 'forced', tools: [noop], model_settings: { tool_choice: 'required' } })],
      provider: openai(fake, 'local'),
    });
    const forced = await run('forced');
    expect(forced.record).toMatchObject({ status: 'completed', output: 'done' });
    expect(fake.requests.slice(0, 2).map((request) => request.body.tool_choice)).toEqual(['required', 'auto']);
    const named = await run('forced', { model_settings: { tool_choice: { name: 'noop' } } });
    expect(named.record).toMatchObject({ status: 'completed', output: 'done again' });
    expect(fake.requests.slice(2).map((request) => request.body.tool_choice)).toEqual([{ type: 'function', function: { name: 'noop' } }, 'auto']);
  });

  it('refuses a bad model_settings or model_fallbacks value at enqueue, naming the key, and queues nothing', async () => {
    const fake = await server({ fallback: () => ({ type: 'text', content: 'ok' }) });
    const { client, prefix } = await engine('settings-refused', { agents: [new Agent({ name: 'strict', tools: [noop] })], provider: openai(fake, 'local') });
    const refused: [unknown, RegExp][] = [
      [{ model_settings: { temperature: 3 } }, /^config\.model_settings\.temperature: expected a number from 0 to 2 \(agent 'strict'; nothing was queued\)$/],
      [{ model_settings: { max_tokens: 0 } }, /^config\.model_settings\.max_tokens: expected an integer >= 1 \(agent 'strict'; nothing was queued\)$/],
      [{ model_settings: { extra_body: { model: 'x' } } }, /^config\.model_settings\.extra_body: may not set 'model'/],
      [
        { model_settings: { tool_choice: { name: 'missing' } } },
        /^config\.model_settings\.tool_choice: names 'missing', which is not one of the agent's tools \(noop\) \(agent 'strict'; nothing was queued\)$/,
      ],
      [{ model_settings: { temprature: 1 } }, /temprature.*temperature/],
      [{ temperature: 1 }, /model_settings\.temperature/],
      [{ model_fallbacks: [{ model: '' }] }, /^config\.model_fallbacks\[0\]\.model: expected a non-empty string \(agent 'strict'; nothing was queued\)$/],
      [{ model_fallbacks: [1, 2, 3, 4, 5].map((n) => ({ model: `m${n}` })) }, /^config\.model_fallbacks: expected a list of at most 4/],
    ];
    for (const [config, message] of refused) await expect(client.enqueue({ agent: 'strict', input: 'go', config })).rejects.toThrow(message);
    expect((await client.list()).runs).toEqual([]);
    const queue = new Queue(QueueName.agent('strict'), { connection: redis, prefix: keysFor(prefix).tag });
    open.push(queue);
    expect(Object.values(await queue.getJobCounts()).every((count) => count === 0)).toBe(true);
    expect(fake.requests).toHaveLength(0);
  });
});

describe('several providers', () => {
  it('sends each agent’s calls through its own provider, a workflow step’s too, with the provider’s id in events and its default model', async () => {
    const alphaServer = await server({ fallback: () => ({ type: 'text', content: 'from alpha' }) });
    const betaServer = await server({ fallback: () => ({ type: 'text', content: 'from beta' }) });
    const flow = new Workflow({ name: 'flow', steps: [{ id: 'write', agent: new Agent({ name: 'flow_writer', provider: 'beta', model: 'beta-flow' }) }] });
    const { run } = await engine('two-providers', {
      agents: [new Agent({ name: 'on_alpha', provider: 'alpha' }), new Agent({ name: 'on_beta', provider: 'beta', model: 'beta-model' }), flow],
      providers: { alpha: openai(alphaServer, 'alpha'), beta: openai(betaServer, 'beta') },
    });
    const [alpha, beta, flowRun] = await Promise.all([run('on_alpha'), run('on_beta'), run('flow')]);
    expect(alpha.record).toMatchObject({ status: 'completed', output: 'from alpha' });
    expect(beta.record).toMatchObject({ status: 'completed', output: 'from beta' });
    expect(flowRun.record).toMatchObject({ status: 'completed', output: 'from beta' });
    expect(alphaServer.requests.map((request) => request.body.model)).toEqual(['alpha-default']);
    expect(betaServer.requests.map((request) => request.body.model).sort()).toEqual(['beta-flow', 'beta-model']);
    expect(ofKind(alpha.events, 'ProviderRequestSent')).toEqual([expect.objectContaining({ provider_id: 'alpha', model_id: 'alpha-default' })]);
    expect(ofKind(beta.events, 'ProviderResponseReceived')).toEqual([expect.objectContaining({ provider_id: 'beta' })]);
    expect(ofKind(flowRun.events, 'ProviderRequestSent')).toEqual([expect.objectContaining({ provider_id: 'beta', model_id: 'beta-flow' })]);
  });

  it('refuses to start a worker whose agent, fallback or workflow step names a provider it lacks, in one line', async () => {
    const local = openaiProvider({ base_url: 'http://127.0.0.1:9/v1', api_key: 'k', id: 'local' });
    const start = (agents: WorkerOptions['agents'], options: Partial<WorkerOptions> = {}) =>
      startWorker({ agents, redis: TEST_REDIS_URL, prefix: testPrefix('refused'), logger: silentLogger, ...options });
    const refusal = async (promise: Promise<unknown>) => {
      const error = await promise.then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).not.toContain('\n');
      return (error as Error).message;
    };
    expect(await refusal(start([new Agent({ name: 'writer', provider: 'fast' })], { providers: { local } }))).toBe(
      "agent 'writer' uses provider 'fast', which this worker does not hold (it holds: local)",
    );
    expect(await refusal(start([new Agent({ name: 'careful', model_fallbacks: [{ model: 'm', provider: 'backup' }] })], { provider: local }))).toBe(
      "agent 'careful' uses provider 'backup', which this worker does not hold (it holds no named providers)",
    );
    const flow = new Workflow({ name: 'flow', steps: [{ id: 'one', agent: new Agent({ name: 'step_agent', provider: 'fast' }) }] });
    expect(await refusal(start([flow], { providers: { local } }))).toBe("agent 'step_agent' uses provider 'fast', which this worker does not hold (it holds: local)");
    expect(await refusal(start([new Agent({ name: 'plain' })], { providers: { local } }))).toBe("agent 'plain' needs a provider: this worker has no default provider");
    // A worker with no provider at all names the agent and the provider too, not just that it has none.
    expect(await refusal(start([new Agent({ name: 'writer', provider: 'fast' })]))).toBe(
      "agent 'writer' uses provider 'fast', which this worker does not hold (it holds no named providers)",
    );
    expect(await refusal(start([new Agent({ name: 'plain' })]))).toBe("agent 'plain' needs a provider: this worker has no default provider");
    // A tools-only worker makes no model calls: it starts.
    const toolsOnly = await start([new Agent({ name: 'writer', provider: 'fast', tools: [noop] })], { roles: ['tools'], providers: { local } });
    await toolsOnly.close();
  });
});

describe('provider ids', () => {
  it('warns at start, naming them, when different providers share an id (a 429 would pause them all); one provider under two names is not warned of', async () => {
    const logger = capturingLogger();
    const bare = (port: number) => openaiProvider({ base_url: `http://127.0.0.1:${port}/v1`, api_key: 'k' });
    const shared = bare(9);
    const prefix = testPrefix('provider-ids');
    prefixes.push(prefix);
    const agents = [new Agent({ name: 'a', provider: 'fast' }), new Agent({ name: 'b', provider: 'slow' })];
    const worker = await startWorker({ agents, redis: TEST_REDIS_URL, prefix, logger, provider: shared, providers: { fast: bare(10), slow: bare(11), again: shared } });
    open.push(worker);
    expect(logger.lines.filter((line) => line.includes('share the id'))).toEqual([
      `providers 'default' and 'fast' and 'slow' share the id 'openai': a 429 from one pauses them all, and their events cannot be told apart; give each its own id (openaiProvider({ id })) {"provider_id":"openai"}`,
    ]);
    const quiet = capturingLogger();
    const distinct = await startWorker({
      agents,
      redis: TEST_REDIS_URL,
      prefix,
      logger: quiet,
      providers: { fast: openaiProvider({ base_url: 'http://127.0.0.1:9/v1', api_key: 'k', id: 'fast' }), slow: shared, also: shared },
    });
    open.push(distinct);
    expect(quiet.lines.filter((line) => line.includes('share the id'))).toEqual([]);
  });
});

describe('fallbacks', () => {
  const fallbackAgent = () => new Agent({ name: 'careful', model: 'primary-model', model_fallbacks: [{ model: 'backup-model', provider: 'backup' }] });

  it('passes a call that keeps failing with 503 on to the fallback, which answers; each try has its own events; the answering model is recorded', async () => {
    const primary = await server({ fallback: () => ({ type: 'status', status: 503 }) });
    const backup = await server({ fallback: () => ({ type: 'text', content: 'from the backup' }) });
    const { run, prefix } = await engine('fallback-503', {
      agents: [fallbackAgent()],
      provider: openai(primary, 'primary'),
      providers: { backup: openai(backup, 'backup') },
      provider_attempts: 2,
    });
    const { record, events, run_id } = await run('careful');
    await uncompacted(redis, prefix, run_id);
    expect(record).toMatchObject({ status: 'completed', output: 'from the backup' });
    expect(primary.requests).toHaveLength(2);
    expect(backup.requests.map((request) => request.body.model)).toEqual(['backup-model']);
    expect(ofKind(events, 'ProviderError').map(({ provider_id, model_id, status, retryable, attempt }) => ({ provider_id, model_id, status, retryable, attempt }))).toEqual([
      { provider_id: 'primary', model_id: 'primary-model', status: 503, retryable: true, attempt: 1 },
      { provider_id: 'primary', model_id: 'primary-model', status: 503, retryable: true, attempt: 2 },
    ]);
    expect(ofKind(events, 'ProviderRequestSent').map(({ provider_id, model_id }) => `${provider_id}/${model_id}`)).toEqual([
      'primary/primary-model',
      'primary/primary-model',
      'backup/backup-model',
    ]);
    expect(ofKind(events, 'ProviderResponseReceived')).toEqual([expect.objectContaining({ provider_id: 'backup', model_id: 'backup-model' })]);
    const stored = JSON.parse((await redis.get(keysFor(prefix).run(run_id).response('s1', 1)))!);
    expect(stored).toMatchObject({ v: 2, target: { provider_id: 'backup', model: 'backup-model' } });
  });

  it("uses a run's config.model_fallbacks, each model with the worker's attempts", async () => {
    const primary = await server({ fallback: () => ({ type: 'status', status: 500 }) });
    const backup = await server({ fallback: () => ({ type: 'text', content: 'configured backup' }) });
    const { run } = await engine('fallback-config', {
      agents: [new Agent({ name: 'plain', model: 'primary-model' })],
      provider: openai(primary, 'primary'),
      providers: { backup: openai(backup, 'backup') },
      provider_attempts: 3,
    });
    const { record } = await run('plain', { model_fallbacks: [{ model: 'backup-model', provider: 'backup' }] });
    expect(record).toMatchObject({ status: 'completed', output: 'configured backup' });
    expect(primary.requests).toHaveLength(3);
    const unheld = await run('plain', { model_fallbacks: [{ model: 'x', provider: 'nowhere' }] });
    expect(unheld.record.status).toBe('failed');
    expect(unheld.record.error).toMatchObject({
      error_code: 'unknown_provider',
      // The run's own config named it, not the agent: the message says so.
      message: "the run's config.model_fallbacks[0] (agent 'plain') uses provider 'nowhere', which this worker does not hold (it holds: backup)",
    });
  });

  it('does not pass a 401 on to the fallback: the step fails provider_error', async () => {
    const primary = await server({ fallback: () => ({ type: 'status', status: 401 }) });
    const backup = await server({ fallback: () => ({ type: 'text', content: 'never' }) });
    const { run } = await engine('fallback-401', {
      agents: [fallbackAgent()],
      provider: openai(primary, 'primary'),
      providers: { backup: openai(backup, 'backup') },
      provider_attempts: 2,
    });
    const { record, events } = await run('careful');
    expect(record.status).toBe('failed');
    expect(record.error).toMatchObject({ error_code: 'provider_error' });
    expect(primary.requests).toHaveLength(1);
    expect(backup.requests).toHaveLength(0);
    expect(ofKind(events, 'ProviderError')).toEqual([expect.objectContaining({ provider_id: 'primary', status: 401, retryable: false })]);
  });

  it('fails provider_error once the last model has failed too', async () => {
    const primary = await server({ fallback: () => ({ type: 'status', status: 502 }) });
    const backup = await server({ fallback: () => ({ type: 'malformed' }) });
    const { run } = await engine('fallback-exhausted', {
      agents: [fallbackAgent()],
      provider: openai(primary, 'primary'),
      providers: { backup: openai(backup, 'backup') },
      provider_attempts: 2,
    });
    const { record, events } = await run('careful');
    expect(record.status).toBe('failed');
    expect(record.error).toMatchObject({ error_code: 'provider_error' });
    expect([primary.requests.length, backup.requests.length]).toEqual([2, 2]);
    expect(ofKind(events, 'ProviderError').map((event) => event.provider_id)).toEqual(['primary', 'primary', 'backup', 'backup']);
  });
});

describe('what moves a call along its fallbacks', () => {
  it('keeps a call on its model when a Redis error follows the answer: the next try asks the same model, never the fallback', async () => {
    let injected: string | undefined;
    const { run, prefix, client } = await engine('redis-error-after-answer', {
      agents: [new Agent({ name: 'careful', model: 'primary-model', model_fallbacks: [{ model: 'backup-model', provider: 'backup' }] })],
      provider: openai(
        await server({
          fallback: async () => {
            if (injected === undefined) {
              // Between the answer and its recording: the response's key holds a list, so recording it fails (a key of another type).
              const { run_id } = (await client.list({ agent: 'careful' })).runs[0]!;
              injected = keysFor(prefix).run(run_id).response('s1', 1);
              await redis.rpush(injected, 'not a response');
            }
            return { type: 'text', content: 'from the primary' };
          },
        }),
        'primary',
      ),
      providers: { backup: openai(await server({ fallback: () => ({ type: 'text', content: 'from the backup' }) }), 'backup') },
      // One try per model: on BullMQ's count of failed attempts, the job's retry would go to the backup.
      provider_attempts: 1,
      // The job's own retry waits long enough for the test to take the list away.
      provider_backoff_ms: 2_000,
    });
    const queue = new Queue(QueueName.agent('careful'), { connection: redis, prefix: keysFor(prefix).tag });
    open.push(queue);
    const running = run('careful');
    await until(async () => {
      const job =
        injected === undefined
          ? undefined
          : (await queue.getJobs(['delayed', 'wait', 'active'])).find((each) => each.failedReason?.includes('(read by the recordResponse script) is not as arcflow writes it'));
      return job !== undefined;
    });
    await redis.del(injected!);
    const { record, events } = await running;
    expect(record).toMatchObject({ status: 'completed', output: 'from the primary' });
    expect(ofKind(events, 'ProviderRequestSent').map(({ provider_id }) => provider_id)).toEqual(['primary', 'primary']);
    expect(ofKind(events, 'ProviderError')).toEqual([]);
  });

  it('hands an unreachable primary (connection refused) over to its fallback after one try, naming the cause, the code and the host in the log', async () => {
    const closed = await server();
    const closedUrl = closed.url;
    await closed.close();
    const logger = capturingLogger();
    const { run } = await engine('unreachable', {
      agents: [new Agent({ name: 'careful', model: 'primary-model', model_fallbacks: [{ model: 'backup-model', provider: 'backup' }] })],
      provider: openaiProvider({ base_url: closedUrl, api_key: 'k', id: 'primary' }),
      providers: { backup: openai(await server({ fallback: () => ({ type: 'text', content: 'from the backup' }) }), 'backup') },
      logger,
    });
    const { record, events } = await run('careful');
    expect(record).toMatchObject({ status: 'completed', output: 'from the backup' });
    expect(ofKind(events, 'ProviderError')).toEqual([expect.objectContaining({ provider_id: 'primary', model_id: 'primary-model', error_code: 'connection_error', attempt: 1 })]);
    const host = new URL(closedUrl).host;
    const logged = logger.lines.find((line) => line.startsWith('provider call failed'));
    expect(logged).toContain('"cause":"APIConnectionError","cause_code":"ECONNREFUSED"');
    expect(logged).toContain(`"host":"${host}"`);
    expect(logged).toContain('"next":"fallback"');
  });

  it('fails a run at once when OPENAI_API_KEY is a literal sk-… (no retries), with a message that names the cause', async () => {
    const fake = await server({ fallback: () => ({ type: 'text', content: 'never' }) });
    const saved = process.env.OPENAI_API_KEY;
    process.env.OPENAI_API_KEY = 'sk-…';
    let provider: ModelProvider;
    try {
      provider = openaiProvider({ base_url: fake.url, id: 'keyed' });
    } finally {
      if (saved === undefined) delete process.env.OPENAI_API_KEY;
      else process.env.OPENAI_API_KEY = saved;
    }
    const { run } = await engine('literal-key', { agents: [new Agent({ name: 'plain', model: 'm' })], provider });
    const { record, events } = await run('plain');
    expect(record.status).toBe('failed');
    expect(record.error).toMatchObject({ code: 'ProviderError', error_code: 'provider_error' });
    expect(record.error!.message).toBe(
      `the provider call to ${new URL(fake.url).host} failed: OPENAI_API_KEY is not a valid HTTP header value (character U+2026 at position 4); set it to the key itself`,
    );
    expect(ofKind(events, 'ProviderError')).toEqual([expect.objectContaining({ provider_id: 'keyed', model_id: 'm', error_code: 'invalid_config', retryable: false, attempt: 1 })]);
    expect(fake.requests).toHaveLength(0);
  });
});

describe('rate limits', () => {
  it('pauses only the provider that answered 429: an agent on another provider answers meanwhile at its usual speed', async () => {
    const limited = await server({
      turns: [
        { type: 'status', status: 429, headers: { 'retry-after': '2' } },
        { type: 'text', content: 'after the wait' },
      ],
    });
    const free = await server({ fallback: () => ({ type: 'text', content: 'no wait' }) });
    const { client, run } = await engine('ratelimit-scope', {
      agents: [new Agent({ name: 'on_limited', provider: 'limited' }), new Agent({ name: 'on_free', provider: 'free' })],
      providers: { limited: openai(limited, 'limited'), free: openai(free, 'free') },
    });
    const { run_id } = await client.enqueue({ agent: 'on_limited', input: 'go' });
    await until(async () => ofKind(await collect(client, run_id), 'ProviderRateLimited').length === 1);
    const started = Date.now();
    const other = await run('on_free');
    const otherMs = Date.now() - started;
    expect(other.record).toMatchObject({ status: 'completed', output: 'no wait' });
    expect(otherMs).toBeLessThan(1_000);
    const waited = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(waited).toMatchObject({ status: 'completed', output: 'after the wait' });
    const events = await collect(client, run_id);
    expect(ofKind(events, 'ProviderRateLimited')).toEqual([expect.objectContaining({ provider_id: 'limited', retry_after_seconds: 2, attempt: 1 })]);
    const [limitedAt, retriedAt] = ofKind(events, 'ProviderRequestSent').map((event) => event.ts);
    expect(retriedAt! - limitedAt!).toBeGreaterThanOrEqual(1_900);
  });
});

describe('rate limits, per provider', () => {
  it("pauses the provider, not the queue: a workflow's step on another provider completes while the paused provider's calls wait", async () => {
    const limited = await server({ turns: [{ type: 'status', status: 429, headers: { 'retry-after': '4' } }], fallback: () => ({ type: 'text', content: 'limited, later' }) });
    const free = await server({ fallback: () => ({ type: 'text', content: 'free' }) });
    const flow = new Workflow({
      name: 'mixed',
      steps: [
        { id: 'slow', agent: new Agent({ name: 'on_limited', provider: 'limited' }) },
        { id: 'quick', agent: new Agent({ name: 'on_free', provider: 'free' }) },
      ],
    });
    const { client } = await engine('ratelimit-per-provider', { agents: [flow], providers: { limited: openai(limited, 'limited'), free: openai(free, 'free') } });
    const first = await client.enqueue({ agent: 'mixed', input: 'go' });
    await until(async () => ofKind(await collect(client, first.run_id), 'ProviderRateLimited').length === 1);
    // A second run on the same queue: its step on the free provider goes on; its step on the limited one waits.
    const second = await client.enqueue({ agent: 'mixed', input: 'go' });
    await until(async () => (await collect(client, second.run_id)).some((event) => event.kind === 'AgentResponseReceived' && event.step_id === 'quick'));
    expect(limited.requests).toHaveLength(1);
    const [firstDone, secondDone] = await Promise.all([client.wait(first.run_id, { timeout_ms: 20_000 }), client.wait(second.run_id, { timeout_ms: 20_000 })]);
    expect([firstDone.status, secondDone.status]).toEqual(['completed', 'completed']);
    expect(limited.requests).toHaveLength(3);
    const events = await collect(client, first.run_id);
    expect(ofKind(events, 'ProviderRateLimited')).toEqual([expect.objectContaining({ step_id: 'slow', provider_id: 'limited', retry_after_seconds: 4, attempt: 1 })]);
  });

  it('sends a call whose provider answers 429 to its fallback on another provider at once, and the next calls too while the pause lasts', async () => {
    const primary = await server({ turns: [{ type: 'status', status: 429, headers: { 'retry-after': '30' } }], fallback: () => ({ type: 'text', content: 'from the primary' }) });
    const backup = await server({ fallback: () => ({ type: 'text', content: 'from the backup' }) });
    const { run } = await engine('ratelimit-fallback', {
      agents: [new Agent({ name: 'careful', model: 'primary-model', model_fallbacks: [{ model: 'backup-model', provider: 'backup' }] })],
      provider: openai(primary, 'primary'),
      providers: { backup: openai(backup, 'backup') },
    });
    const first = await run('careful');
    expect(first.record).toMatchObject({ status: 'completed', output: 'from the backup' });
    const calls = (events: TraceEvent[]) =>
      events.filter((event) => event.kind.startsWith('Provider')).map((event) => `${event.kind} ${(event as { provider_id: string }).provider_id}`);
    expect(calls(first.events)).toEqual(['ProviderRequestSent primary', 'ProviderRateLimited primary', 'ProviderRequestSent backup', 'ProviderResponseReceived backup']);
    expect(ofKind(first.events, 'ProviderRateLimited')).toEqual([expect.objectContaining({ retry_after_seconds: 30 })]);
    // The primary is paused for 30 s: the next run's call goes to the backup without asking it.
    const second = await run('careful');
    expect(second.record).toMatchObject({ status: 'completed', output: 'from the backup' });
    expect(calls(second.events)).toEqual(['ProviderRequestSent backup', 'ProviderResponseReceived backup']);
    expect(primary.requests).toHaveLength(1);
  });
});

describe('the recorded response format', () => {
  const response = { content: 'hi', tool_calls: [], finish_reason: 'stop', usage: { input: 1, output: 1, total: 2 } };

  it('reads the model that answered, and a response recorded before fallbacks existed (format 2, no target)', () => {
    const recorded = { response, plan: { type: 'complete' as const }, target: { provider_id: 'backup', model: 'backup-model' } };
    expect(readResponse(writeResponse(recorded), 'response')).toEqual(recorded);
    expect(readResponse(JSON.stringify({ v: 2, response, plan: { type: 'complete' } }), 'response')).toEqual({ response, plan: { type: 'complete' } });
  });

  it('refuses a malformed target as unreadable by any version', () => {
    const read = () => readResponse(JSON.stringify({ v: 2, response, plan: { type: 'complete' }, target: { provider_id: 7 } }), 'response 1');
    expect(read).toThrow(StoredFormatError);
    try {
      read();
    } catch (error) {
      expect((error as StoredFormatError).newer).toBe(false);
    }
  });
});
