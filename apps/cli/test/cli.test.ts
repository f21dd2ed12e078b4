import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { ARCFLOW_BIN, type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runArcflow } from './run-arcflow.ts';

const run = promisify(execFile);
const EXAMPLE = new URL('../../../examples/weather-agent.ts', import.meta.url).pathname;
const prefix = testPrefix('cli');
const env = { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
let worker: WorkerProcess;

const arcflow = (...args: string[]) => runArcflow(env, ...args);

/** Registers an agent whose workers have all gone (a rolling deploy, scale to zero): runs of it wait in its queue. */
async function registerUnserved(agent: string): Promise<void> {
  const redis = new Redis(TEST_REDIS_URL);
  await redis.set(`{${prefix}}:agent:${agent}`, JSON.stringify({ provider_queue: `provider-${agent}`, tools: [], provider_attempts: 1 }));
  await redis.sadd(`{${prefix}}:agents`, agent);
  await redis.quit();
}

beforeAll(async () => {
  worker = await spawnWorker(EXAMPLE, { env: { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' } });
});
afterAll(async () => {
  await worker.stop();
  await cleanupPrefix(prefix);
  await cleanupPrefix('arcflow-demo-cli-test');
});

describe('arcflow CLI', () => {
  it('enqueues, waits, and reads the run back with get, events and inspect', async () => {
    const enqueued = await arcflow('enqueue', 'travel_researcher', 'Trip to Tokyo?', '--wait', '--json');
    expect(enqueued.code).toBe(0);
    const record = JSON.parse(enqueued.stdout);
    expect(record).toMatchObject({ status: 'completed', iterations: 3 });
    expect(record.output).toContain('Tokyo');

    const listed = await arcflow('runs', '--json', '--limit', '5');
    expect(JSON.parse(listed.stdout).runs[0]).toMatchObject({ run_id: record.run_id, status: 'completed', agent: 'travel_researcher' });
    const table = await arcflow('runs', '--status', 'completed');
    expect(table.stdout).toMatch(new RegExp(`^RUN +STATUS +AGENT[^\\n]*\\n${record.run_id} +completed +travel_researcher`));
    const got = await arcflow('get', record.run_id);
    expect(got.stdout).toContain('status     completed');

    const events = await arcflow('events', record.run_id, '--json');
    const lines = events.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines.map((event) => event.seq)).toEqual(lines.map((_, index) => index + 1));
    expect(lines.at(-1)).toMatchObject({ kind: 'RunCompleted' });

    const tree = await arcflow('inspect', record.run_id);
    expect(tree.stdout).toContain('└─ step s1  agent travel_researcher');
    expect(tree.stdout).toContain('convert_currency');
    expect(tree.stdout).toContain('invalid input  amount: expected number');
    // Round 1 in the model's order (weather, time, currency), although the invalid currency call
    // was answered before the other two started.
    const round1 = tree.stdout.slice(tree.stdout.indexOf('iteration 1'), tree.stdout.indexOf('iteration 2'));
    const positions = ['get_weather', 'get_local_time', 'convert_currency'].map((name) => round1.indexOf(name));
    expect(positions.every((position) => position > 0)).toBe(true);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));

    // The conversation: what the tools received and returned, and the answer (events hold none of it).
    const conversation = await arcflow('inspect', record.run_id, '--messages');
    expect(conversation.code).toBe(0);
    expect(conversation.stdout).toMatch(/^\[0\] system: /);
    expect(conversation.stdout).toContain('user: Trip to Tokyo?');
    expect(conversation.stdout).toMatch(/→ get_weather \S+ \{"city":"Tokyo"/);
    expect(conversation.stdout).toMatch(/\[\d+\] tool \S+: Error: invalid arguments — amount: expected number/);
    expect(conversation.stdout).toMatch(/\[\d+\] tool \S+: 100 EUR = 1160.00 NOK/);
    const asJson = JSON.parse((await arcflow('inspect', record.run_id, '--messages', '--json')).stdout);
    expect(asJson.run_id).toBe(record.run_id);
    expect(asJson.messages.at(-1)).toEqual({ role: 'assistant', content: record.output });
    expect(asJson.messages.filter((message: { role: string }) => message.role === 'tool').length).toBeGreaterThanOrEqual(3);
    expect(conversation.stdout).toContain(`assistant: ${record.output.split('\n')[0]}`);
    const unknown = await arcflow('inspect', 'run_doesnotexist', '--messages');
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringMatching(/^arcflow: unknown run 'run_doesnotexist' \(looked under prefix '.+'\)\n$/) });
  }, 120_000);

  it('stops quietly when its reader closes the pipe early (events --follow | head -1)', async () => {
    const enqueued = await arcflow('enqueue', 'travel_researcher', 'Oslo?', '--wait', '--json');
    const { run_id } = JSON.parse(enqueued.stdout);
    const child = spawn(process.execPath, [ARCFLOW_BIN, 'events', run_id, '--follow', '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // Like `head -1`: read the first line, then close our end of the pipe.
    await new Promise<void>((gotLine) => child.stdout.once('data', () => gotLine()));
    child.stdout.destroy();
    const code = await new Promise<number | null>((exited) => child.once('exit', exited));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });

  it('enqueues a list of messages with --input-json, and refuses a bad one naming its field, with nothing queued', async () => {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Trip to Lima?' },
    ];
    const enqueued = await arcflow('enqueue', 'travel_researcher', '--input-json', JSON.stringify(messages), '--wait', '--json');
    expect(enqueued.code).toBe(0);
    const record = JSON.parse(enqueued.stdout);
    expect(record).toMatchObject({ status: 'completed' });
    expect(record.output).toContain('Lima');

    const runsBefore = JSON.parse((await arcflow('runs', '--json', '--limit', '500')).stdout).runs.length;
    const bad = await arcflow('enqueue', 'travel_researcher', '--input-json', '[{"role":"user","content":"hi"},{"role":"user"}]');
    expect(bad).toMatchObject({ code: 1, stdout: '' });
    expect(bad.stderr).toBe('arcflow: input[1].content: expected a string or a list of text and image_url parts\n');
    const notJson = await arcflow('enqueue', 'travel_researcher', '--input-json', '[{role:');
    expect(notJson.code).toBe(1);
    expect(notJson.stderr).toContain('arcflow: --input-json is not valid JSON');
    const both = await arcflow('enqueue', 'travel_researcher', 'Lima?', '--input-json', JSON.stringify(messages));
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('enqueue takes <agent> and --input-json JSON, with no <input>');
    expect(JSON.parse((await arcflow('runs', '--json', '--limit', '500')).stdout).runs).toHaveLength(runsBefore);
  });

  it('prints just the run id without --wait, and honours an idempotency key', async () => {
    const first = await arcflow('enqueue', 'travel_researcher', 'Lima?', '--idempotency-key', 'cli-key-1');
    const second = await arcflow('enqueue', 'travel_researcher', 'Lima?', '--idempotency-key', 'cli-key-1');
    expect(first.stdout.trim()).toMatch(/^run_[A-Za-z0-9_-]{22}$/);
    expect(second.stdout.trim()).toBe(first.stdout.trim());
  });

  it('refuses an idempotency key repeated with another input (exit 1, idempotency_conflict), a misspelt flag naming the nearest (exit 2), and names the prefix of an unknown run', async () => {
    const first = await arcflow('enqueue', 'travel_researcher', 'Lima?', '--idempotency-key', 'cli-key-conflict');
    expect(first.code).toBe(0);
    const other = await arcflow('enqueue', 'travel_researcher', 'Quito?', '--idempotency-key', 'cli-key-conflict');
    expect(other.code).toBe(1);
    expect(other.stderr).toContain(`arcflow: idempotency_key 'cli-key-conflict' was used for another request (run '${first.stdout.trim()}')`);
    expect(other.stdout).toBe('');
    const misspelt = await arcflow('enqueue', 'travel_researcher', 'Lima?', '--threadid', 'cli:x');
    expect(misspelt.code).toBe(2);
    expect(misspelt.stderr).toContain("arcflow: unknown option '--threadid'; did you mean '--thread'?");
    const unknown = await arcflow('get', 'run_not_there');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`arcflow: unknown run 'run_not_there' (looked under prefix '${prefix}')`);
  });

  it('runs on a thread with --thread, and prints the thread with `thread` (text and --json)', async () => {
    const first = await arcflow('enqueue', 'travel_researcher', 'Trip to Oslo?', '--thread', 'cli:trip', '--wait', '--json');
    expect(first.code).toBe(0);
    const second = await arcflow('enqueue', 'travel_researcher', 'And Bergen?', '--thread', 'cli:trip', '--on-busy', 'queue', '--wait', '--json');
    expect(JSON.parse(second.stdout)).toMatchObject({ status: 'completed', thread_id: 'cli:trip' });
    const shown = await arcflow('thread', 'cli:trip', '--json');
    expect(shown.code).toBe(0);
    const thread = JSON.parse(shown.stdout);
    expect(thread.runs.map((run: { run_id: string }) => run.run_id)).toEqual([JSON.parse(first.stdout).run_id, JSON.parse(second.stdout).run_id]);
    expect(thread.messages.filter((message: { role: string }) => message.role === 'user').map((message: { content: string }) => message.content)).toEqual([
      'Trip to Oslo?',
      'And Bergen?',
    ]);
    const text = await arcflow('thread', 'cli:trip');
    expect(text.stdout).toContain('user: And Bergen?');
    expect(text.stdout).toContain('runs (2):');
    const bad = await arcflow('enqueue', 'travel_researcher', 'x', '--thread', 'bad id');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('thread_id');
  });

  it('names the nearest known flag for a misspelt one, and the nearest tool for a misspelt --tools name', async () => {
    const flag = await arcflow('enqueue', 'travel_researcher', 'Lima?', '--sate', '{}');
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/^arcflow: unknown option '--sate'; did you mean '--state'\?\n\nusage: arcflow/);
    const tools = await arcflow('worker', '--module', EXAMPLE, '--tools', 'get_wether,get_local_time');
    expect(tools).toMatchObject({ code: 1, stderr: "arcflow: --tools names tools no served agent has: get_wether (did you mean 'get_weather'?)\n" });
  });

  it('refuses --on-busy without --thread, naming both, with nothing queued', async () => {
    const runsBefore = JSON.parse((await arcflow('runs', '--json', '--limit', '500')).stdout).runs.length;
    const refused = await arcflow('enqueue', 'travel_researcher', 'Lima?', '--on-busy', 'steer');
    expect(refused).toMatchObject({
      code: 1,
      stdout: '',
      stderr: 'arcflow: --on-busy needs --thread: it says what a run does when its thread already has one queued or running\n',
    });
    expect(JSON.parse((await arcflow('runs', '--json', '--limit', '500')).stdout).runs).toHaveLength(runsBefore);
  });

  it('refuses an unknown agent and bad JSON with a clear message and exit code 1', async () => {
    const unknown = await arcflow('enqueue', 'nobody', 'hi');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("arcflow: unknown agent 'nobody'");
    const badJson = await arcflow('enqueue', 'travel_researcher', 'hi', '--config', '{max');
    expect(badJson.code).toBe(1);
    expect(badJson.stderr).toContain('--config is not valid JSON');
    const suggested = await arcflow('enqueue', 'travel_reseacher', 'hi');
    expect(suggested.stderr).toContain("arcflow: unknown agent 'travel_reseacher' (did you mean 'travel_researcher'?)");
    const badTimeout = await arcflow('enqueue', 'travel_researcher', 'hi', '--wait', '--timeout-ms', 'abc');
    expect(badTimeout.code).toBe(1);
    expect(badTimeout.stderr).toContain('arcflow: --timeout-ms must be a whole number of milliseconds, got "abc"');
    // An option the command does not take is refused, not ignored (runs cancel --limit would cancel every match).
    const bulkLimit = await arcflow('runs', 'cancel', '--status', 'completed', '--limit', '1');
    expect(bulkLimit.code).toBe(2);
    expect(bulkLimit.stderr).toMatch(/^arcflow: runs cancel does not take --limit \(it takes --status, --agent, --tenant, --since, --dry-run, --json\)/);
    expect((await arcflow('runs', '--since', '2099-01-01T00:00:00Z')).stderr).toMatch(/^arcflow: runs does not take --since/);
    expect((await arcflow('cancel', 'run_x', '--reject')).stderr).toMatch(/^arcflow: cancel does not take --reject \(it takes no option\)/);
    expect((await arcflow('enqueue', 'travel_researcher', '--input-json', '"hi"')).stderr).toContain('arcflow: --input-json must be a JSON list of chat messages');
    for (const port of ['', '0x4e21', '1e4'])
      expect((await arcflow('serve', '--port', port)).stderr).toContain(`arcflow: --port must be an integer from 0 to 65535, got ${JSON.stringify(port)}`);
    const badRun = await arcflow('get', 'run_x:events');
    expect(badRun.code).toBe(1);
    expect(badRun.stderr).toMatch(/^arcflow: run_id must match/);
    const usage = await arcflow('frobnicate');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("unknown command 'frobnicate'");
  });

  it('says in one line, without a stack, that Redis cannot be reached (CLI) or that it waits for it (worker)', async () => {
    const away = { ...env, REDIS_URL: 'redis://ops:hunter2@127.0.0.1:1' };
    const started = Date.now();
    const got = await run(process.execPath, [ARCFLOW_BIN, 'get', 'run_abc'], { env: away }).catch((error: { code: number; stderr: string }) => error);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect((got as { code: number }).code).toBe(1);
    expect((got as { stderr: string }).stderr.trim()).toBe('arcflow: cannot reach Redis at redis://ops:***@127.0.0.1:1 (ECONNREFUSED at 127.0.0.1:1)');
    const worker = spawn(process.execPath, [ARCFLOW_BIN, 'worker', '--module', EXAMPLE], { env: away, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    worker.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => worker.on('exit', (code) => resolve(code)));
    // Until it says it waits (its signal handlers are in place by then), however slow the machine.
    for (let tries = 0; tries < 300 && !stderr.includes('waiting for Redis'); tries += 1) await new Promise((resolve) => setTimeout(resolve, 100));
    // Stopped while it waits: it holds nothing, so it exits 0 without waiting for Redis.
    const stopping = Date.now();
    worker.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(Date.now() - stopping).toBeLessThan(5_000);
    const lines = stderr.trim().split('\n');
    expect(lines).toHaveLength(2);
    // The worker's log line (pino, loaded at its first line): its level, message, id, pid and ISO time.
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 'warn',
      message: 'waiting for Redis at redis://ops:***@127.0.0.1:1 (ECONNREFUSED at 127.0.0.1:1)',
      worker_id: expect.stringMatching(/^worker_\w+$/),
      pid: worker.pid,
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(lines[1]).toMatch(/^arcflow worker worker_\w+: SIGTERM, draining in-flight jobs$/);
  });

  it('accepts a run for a known agent with no live worker, and get and inspect say it waits', async () => {
    await registerUnserved('sleeper');
    const enqueued = await arcflow('enqueue', 'sleeper', 'hi');
    expect(enqueued.code).toBe(0);
    const run_id = enqueued.stdout.trim();
    // On stderr, `get --json` too, so stdout stays the record.
    for (const args of [['get'], ['get', '--json'], ['inspect']]) {
      const shown = await arcflow(...args, run_id);
      expect(shown.stderr).toContain("note: no live worker serves agent 'sleeper' now; the run waits in its queue");
      expect(shown.stdout).not.toContain('note:');
    }
    await arcflow('cancel', run_id);
  });

  it('says, before enqueue --wait waits, that no live worker serves the agent (stderr), then waits its --timeout-ms and says the run goes on', async () => {
    await registerUnserved('sleeper');
    // On stderr, so --json stays JSON.
    const waited = await arcflow('enqueue', 'sleeper', 'hi', '--wait', '--json', '--timeout-ms', '300');
    expect(waited.code).toBe(1);
    const waitedRun = JSON.parse(waited.stdout).run_id;
    expect(waited.stderr).toBe(
      "note: no live worker serves agent 'sleeper' now; the run waits in its queue until one starts (arcflow worker --module <file>)\n" +
        `arcflow: run ${waitedRun} is still queued after 300 ms (--timeout-ms); it goes on: \`arcflow get ${waitedRun}\` shows it later\n`,
    );
    expect(JSON.parse(waited.stdout)).toMatchObject({ status: 'queued' });
    await arcflow('cancel', JSON.parse(waited.stdout).run_id);
    // A served agent's wait says nothing of the kind.
    const served = await arcflow('enqueue', 'travel_researcher', 'Rome?', '--wait');
    expect(served).toMatchObject({ code: 0, stderr: '' });
    expect((await arcflow('help')).stdout).toContain('--timeout-ms');
  }, 120_000);

  it('says where a steering run sent its input (get and enqueue --wait)', async () => {
    await registerUnserved('steer_target');
    // The thread's first run waits in its queue (no worker serves its agent): the thread is busy.
    const active = (await arcflow('enqueue', 'steer_target', 'first', '--thread', 'cli:steer')).stdout.trim();
    const steering = await arcflow('enqueue', 'steer_target', 'also this', '--thread', 'cli:steer', '--on-busy', 'steer', '--wait');
    expect(steering).toMatchObject({ code: 0, stderr: '' });
    expect(steering.stdout).toContain(`status     completed (steered into ${active}: its input joined that run's conversation)`);
    const steeringRun = /^run +(\S+)$/m.exec(steering.stdout)![1]!;
    expect((await arcflow('get', steeringRun)).stdout).toContain(`status     completed (steered into ${active}: its input joined that run's conversation)`);
    await arcflow('cancel', active);
  }, 120_000);

  it('runs the demo end to end with no API key', async () => {
    const demo = await run(process.execPath, [ARCFLOW_BIN, 'demo', '--runs', '4'], {
      env: { ...env, ARCFLOW_PREFIX: 'arcflow-demo-cli-test' },
      timeout: 60_000,
    });
    expect(demo.stdout).toContain('started 2 worker processes');
    expect(demo.stdout).toContain('RunCompleted');
    expect(demo.stdout).toContain('progress: 8/8 runs finished');
    expect(demo.stdout).toMatch(/runs\s+8 \(8 completed, 0 not; 4 of them workflows\)/);
    expect(demo.stdout).toMatch(/workflow city_briefing {2}completed/);
    expect(demo.stdout).toMatch(/step report {2}completed .* after weather, local_time, fx/);
    expect(demo.stdout).toMatch(/step fx {2}tool {2}completed/);
  });
});
