import { RequestError } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { type FakeRequest, type FakeTurn, startFakeOpenAI } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { collect, fixtureWorkers } from './harness.ts';

// SPEC §15, through `arcflow worker` processes and a fake OpenAI-compatible server: a fork replays
// its source's recorded rounds before its iteration (no model call, no tool execution, counted at
// the server and in the tool) and runs live from there, on the state before that iteration.

const FIXTURE = new URL('./fixtures/fork-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);

type Message = { role: string; content: string };

/**
 * `count`: one `step` call per iteration until 11 steps are taken, then (iteration 12) a 400 while
 * `failing`, else the text `finished`. `fail`: a 400 while `failing`. `guard`: a call that needs
 * approval, then a 400 while `failing`. Anything else: `re: <it>`.
 */
function fakeModel(failing: { on: boolean }) {
  return (request: FakeRequest): FakeTurn => {
    const messages = request.body.messages as Message[];
    const at = messages.map((message) => message.role).lastIndexOf('user');
    const said = messages[at]!.content;
    if (said === 'count') {
      const done = messages.slice(at).filter((message) => message.role === 'tool').length;
      if (done < 11) return { type: 'tools', calls: [{ name: 'step', arguments: { n: done + 1 } }] };
      return failing.on ? { type: 'status', status: 400, body: { error: { message: 'down' } } } : { type: 'text', content: 'finished' };
    }
    if (said === 'fail' && failing.on) return { type: 'status', status: 400, body: { error: { message: 'down' } } };
    // `guard`: a call that needs approval, then (after its result) a 400 while `failing`.
    if (said === 'guard') {
      if (messages.at(-1)!.role !== 'tool') return { type: 'tools', calls: [{ name: 'guarded', arguments: {} }] };
      return failing.on ? { type: 'status', status: 400, body: { error: { message: 'down' } } } : { type: 'text', content: 'guarded and done' };
    }
    return { type: 'text', content: `re: ${said}` };
  };
}

async function setup(name: string) {
  const failing = { on: true };
  const fake = await startFakeOpenAI({ fallback: fakeModel(failing) });
  const workers = forTest(name);
  await workers.start({ env: { FAKE_URL: fake.url }, readyTimeoutMs: 120_000 });
  const client = createClient({ redis: workers.url, prefix: workers.prefix });
  const close = async () => {
    await client.close();
    await fake.close();
  };
  /** A `count` run that fails at iteration 12 (11 steps taken; its 12th call answered 400, so 11 responses). */
  const failedRun = async () => {
    const { run_id } = await client.enqueue({ agent: 'stepper', input: 'count', state: { origin: 'given' } });
    const run = await client.wait(run_id, { timeout_ms: 60_000 });
    expect(run).toMatchObject({ status: 'failed', iterations: 11, error: { error_code: 'provider_error' } });
    return run_id;
  };
  return { fake, failing, workers, client, close, failedRun };
}

const codeOf = (thrown: unknown) => (thrown instanceof RequestError ? thrown.code : String(thrown));

describe('fork and retry (SPEC §15)', () => {
  it('a failed 12-iteration run forked at 12 makes one model call and executes no tool for iterations 1-11', async () => {
    const { fake, failing, workers, client, close, failedRun } = await setup('fork-twelve');
    try {
      const source = await failedRun();
      expect(await workers.executions('step')).toBe(11);
      failing.on = false;
      const calls = fake.requests.length;
      const { run_id } = await client.fork(source, { from: { iteration: 12 } });
      const run = await client.wait(run_id, { timeout_ms: 60_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'finished', forked_from: { run_id: source, step_id: 's1', iteration: 12 } });
      expect(fake.requests.length - calls).toBe(1);
      expect(await workers.executions('step')).toBe(11);
      // The live call was made on the whole conversation the replayed rounds built.
      const sent = fake.requests.at(-1)!.body.messages as Message[];
      expect(sent.filter((message) => message.role === 'tool').map((message) => message.content)).toEqual(
        Array.from({ length: 11 }, (_, k) => `saw ${JSON.stringify(Array.from({ length: k }, (_, j) => j + 1))}`),
      );
      // The state before iteration 12: the given state and the 11 steps.
      expect(run.state).toEqual({ origin: 'given', steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] });
      // Only the live call's usage counts; the source is unchanged.
      expect(run.iterations).toBe(1);
      expect((await client.get(source))!.status).toBe('failed');
    } finally {
      await close();
    }
  }, 180_000);

  it('a fork from iteration 5 runs 5 on live, on the state before 5', async () => {
    const { fake, failing, workers, client, close, failedRun } = await setup('fork-five');
    try {
      const source = await failedRun();
      failing.on = false;
      const calls = fake.requests.length;
      const { run_id } = await client.fork(source, { from: { iteration: 5 } });
      const run = await client.wait(run_id, { timeout_ms: 60_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'finished', iterations: 8 });
      // Calls 5-12 live; steps 5-11 executed again.
      expect(fake.requests.length - calls).toBe(8);
      expect(await workers.executions('step')).toBe(11 + 7);
      const conversation = (await client.messages(run_id)).messages as Message[];
      // Step 5 saw the state as it stood before iteration 5.
      expect(conversation.filter((message) => message.role === 'tool')[4]!.content).toBe('saw [1,2,3,4]');
      expect(run.state).toEqual({ origin: 'given', steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] });
      // The replayed rounds' tokens were the source's: the fork's running total counts its own calls only, as its usage does.
      const events = await collect(client, run_id);
      const consumed = events.filter((event) => event.kind === 'TokensConsumed');
      expect(consumed).toHaveLength(8);
      expect(consumed.at(-1)).toMatchObject({ cumulative: run.usage });
      expect(events.at(-1)).toMatchObject({ kind: 'RunCompleted', usage: run.usage });
    } finally {
      await close();
    }
  }, 180_000);

  it('retry forks from the failed iteration, once; a run that did not fail or get cancelled is refused', async () => {
    const { fake, failing, workers, client, close, failedRun } = await setup('fork-retry');
    try {
      const source = await failedRun();
      failing.on = false;
      const calls = fake.requests.length;
      const retried = await client.retry(source);
      const run = await client.wait(retried.run_id, { timeout_ms: 60_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'finished', forked_from: { run_id: source, step_id: 's1', iteration: 12 } });
      expect(fake.requests.length - calls).toBe(1);
      expect(await workers.executions('step')).toBe(11);
      expect((await client.get(source))!.retried_by).toBe(retried.run_id);
      // Again: the same retry.
      expect(await client.retry(source)).toEqual(retried);
      const refused = await client.retry(retried.run_id).catch(codeOf);
      expect(refused).toBe('invalid_request');
    } finally {
      await close();
    }
  }, 180_000);

  it('bad forks change nothing and say why', async () => {
    const { client, close, failedRun } = await setup('fork-bad');
    try {
      const source = await failedRun();
      const before = (await client.list({ limit: 100 })).runs.length;
      expect(await client.fork('run_nope', { from: { iteration: 1 } }).catch(codeOf)).toBe('unknown_run');
      expect(await client.fork(source, { from: { iteration: 13 } }).catch(codeOf)).toBe('invalid_request');
      expect(await client.fork(source, { from: { iteration: 0 } }).catch(codeOf)).toBe('invalid_request');
      expect(await client.fork(source, { from: { iteration: 1.5 } }).catch(codeOf)).toBe('invalid_request');
      expect(await client.fork(source, { from: { step_id: 'other', iteration: 1 } }).catch(codeOf)).toBe('invalid_request');
      expect(await client.retry('run_nope').catch(codeOf)).toBe('unknown_run');
      expect((await client.list({ limit: 100 })).runs.length).toBe(before);
      expect((await client.get(source))!.retried_by).toBeUndefined();
    } finally {
      await close();
    }
  }, 180_000);

  it('a fork of a thread run branches the thread as it stood before that run; the source thread is unchanged', async () => {
    const { failing, client, close } = await setup('fork-thread');
    try {
      const first = await client.enqueue({ agent: 'stepper', input: 'hello', thread_id: 'talk' });
      expect((await client.wait(first.run_id, { timeout_ms: 60_000 })).status).toBe('completed');
      const second = await client.enqueue({ agent: 'stepper', input: 'fail', thread_id: 'talk' });
      expect((await client.wait(second.run_id, { timeout_ms: 60_000 })).status).toBe('failed');
      const before = await client.thread('talk').messages();
      expect(before).toEqual([
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: 're: hello' },
      ]);
      failing.on = false;
      const forked = await client.retry(second.run_id);
      expect(forked.thread_id).toMatch(/^talk\.fork-[0-9a-f]{12}$/);
      const run = await client.wait(forked.run_id, { timeout_ms: 60_000 });
      expect(run).toMatchObject({ status: 'completed', output: 're: fail', thread_id: forked.thread_id });
      expect(await client.thread(forked.thread_id!).messages()).toEqual([...before, { role: 'user', content: 'fail' }, { role: 'assistant', content: 're: fail' }]);
      expect(await client.thread('talk').messages()).toEqual(before);
      expect((await client.thread(forked.thread_id!).runs()).map((each) => each.run_id)).toEqual([forked.run_id]);
    } finally {
      await close();
    }
  }, 180_000);

  it('a bulk retry run twice retries each run once; a dry run changes nothing; a bulk cancel of ended runs does nothing', async () => {
    const { failing, client, close } = await setup('fork-bulk');
    try {
      const sources = await Promise.all([1, 2, 3].map(() => client.enqueue({ agent: 'stepper', input: 'fail' })));
      for (const { run_id } of sources) expect((await client.wait(run_id, { timeout_ms: 60_000 })).status).toBe('failed');
      const ids = sources.map((source) => source.run_id).sort();
      failing.on = false;
      const dry = await client.bulk({ action: 'retry', filter: { status: 'failed', agent: 'stepper' }, dry_run: true });
      expect({ ...dry, run_ids: [...dry.run_ids].sort() }).toEqual({ matched: 3, acted: 0, run_ids: ids });
      for (const id of ids) expect((await client.get(id))!.retried_by).toBeUndefined();
      expect((await client.list({ status: 'completed' })).runs).toEqual([]);
      const first = await client.bulk({ action: 'retry', filter: { status: 'failed' } });
      expect({ ...first, run_ids: [...first.run_ids].sort() }).toEqual({ matched: 3, acted: 3, run_ids: ids });
      const second = await client.bulk({ action: 'retry', filter: { status: 'failed' } });
      expect(second).toEqual({ matched: 3, acted: 0, run_ids: [] });
      const retries = await Promise.all(ids.map(async (id) => (await client.get(id))!.retried_by!));
      for (const retry of retries) expect((await client.wait(retry, { timeout_ms: 60_000 })).status).toBe('completed');
      expect((await client.list({ limit: 100 })).runs.length).toBe(6);
      // A filter by tenant matches only runs of that tenant (these runs have none), and `since` only later runs.
      expect(await client.bulk({ action: 'retry', filter: { status: 'failed', tenant: 'acme' } })).toEqual({ matched: 0, acted: 0, run_ids: [] });
      expect(await client.bulk({ action: 'retry', filter: { status: 'failed', since: new Date(Date.now() + 60_000).toISOString() } })).toEqual({
        matched: 0,
        acted: 0,
        run_ids: [],
      });
      expect(await client.bulk({ action: 'cancel', filter: { status: 'completed' } })).toEqual({ matched: 3, acted: 0, run_ids: [] });
      expect(await client.bulk({ action: 'cancel', filter: { status: 'failed' }, dry_run: true })).toEqual({ matched: 3, acted: 0, run_ids: [] });
      expect(await client.bulk({ action: 'retry', filter: { status: 'failed', since: 'yesterday' } }).catch(codeOf)).toBe('invalid_request');
    } finally {
      await close();
    }
  }, 180_000);

  it('a workflow run: retry re-runs the failed step from its failed iteration and the step it skipped; a fork from a step re-runs it and its dependents only', async () => {
    const { fake, failing, workers, client, close } = await setup('fork-workflow');
    try {
      const { run_id: source } = await client.enqueue({ agent: 'chain', input: 'go' });
      const failed = await client.wait(source, { timeout_ms: 60_000 });
      expect(failed).toMatchObject({ status: 'failed', steps: { fetch: { status: 'completed', output: 're: hello' }, count: { status: 'failed' }, sum: { status: 'skipped' } } });
      expect(await workers.executions('step')).toBe(11);
      failing.on = false;
      let calls = fake.requests.length;
      const retried = await client.retry(source);
      const run = await client.wait(retried.run_id, { timeout_ms: 60_000 });
      expect(run).toMatchObject({
        status: 'completed',
        output: 're: sum re: hello finished',
        forked_from: { run_id: source, step_id: 'count', iteration: 12 },
        steps: { fetch: { status: 'completed', output: 're: hello' }, count: { status: 'completed', output: 'finished' }, sum: { status: 'completed' } },
      });
      // count's call 12 and sum's one call; fetch kept its output.
      expect(fake.requests.length - calls).toBe(2);
      expect(await workers.executions('step')).toBe(11);

      calls = fake.requests.length;
      const forked = await client.fork(retried.run_id, { from: { step_id: 'fetch' } });
      expect(await client.wait(forked.run_id, { timeout_ms: 60_000 })).toMatchObject({
        status: 'completed',
        output: 're: sum re: hello finished',
        forked_from: { run_id: retried.run_id, step_id: 'fetch', iteration: 1 },
      });
      // fetch and sum again; count, which depends on neither, made no call and ran no tool.
      expect(fake.requests.length - calls).toBe(2);
      expect(await workers.executions('step')).toBe(11);
      const events = [];
      for await (const event of client.events(forked.run_id)) events.push(event);
      expect(events.filter((event) => event.kind === 'StepStarted').map((event) => event.step_id)).toEqual(['fetch', 'sum']);

      // A fork from count's last iteration starts on the state before count (SPEC §17): count's own changes are made again, once.
      expect(run.state).toEqual({ steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] });
      const again = await client.fork(retried.run_id, { from: { step_id: 'count', iteration: 12 } });
      expect(await client.wait(again.run_id, { timeout_ms: 60_000 })).toMatchObject({ status: 'completed', state: { steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] } });
      expect(await workers.executions('step')).toBe(11);

      expect(await client.fork(source, { from: { iteration: 1 } }).catch(codeOf)).toBe('invalid_request');
      expect(await client.fork(source, { from: { step_id: 'nope' } }).catch(codeOf)).toBe('invalid_request');
      await expect(client.fork(source, { from: { step_id: 'cuont' } })).rejects.toThrow(/has no step 'cuont'; did you mean 'count'\? \(steps: .*count/);
      expect(await client.fork(source, { from: { step_id: 'count', iteration: 13 } }).catch(codeOf)).toBe('invalid_request');
    } finally {
      await close();
    }
  }, 180_000);

  it('a replayed round that waited for approval is not asked again, and its tool does not run again', async () => {
    const { fake, failing, workers, client, close } = await setup('fork-approval');
    try {
      const { run_id: source } = await client.enqueue({ agent: 'stepper', input: 'guard' });
      let waiting = await client.wait(source, { timeout_ms: 2_000 });
      for (let tries = 0; tries < 100 && !waiting.pending_approvals; tries += 1) waiting = (await client.get(source))!;
      await client.approve(source, waiting.pending_approvals![0]!.tool_call_id, { approved: true, by: 'test' });
      expect(await client.wait(source, { timeout_ms: 60_000 })).toMatchObject({ status: 'failed', iterations: 1 });
      expect(await workers.executions('guarded')).toBe(1);
      failing.on = false;
      const calls = fake.requests.length;
      const retried = await client.retry(source);
      const run = await client.wait(retried.run_id, { timeout_ms: 60_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'guarded and done', forked_from: { iteration: 2 } });
      expect(run.pending_approvals).toBeUndefined();
      expect(fake.requests.length - calls).toBe(1);
      expect(await workers.executions('guarded')).toBe(1);
      const kinds = [];
      for await (const event of client.events(retried.run_id)) kinds.push(event.kind);
      expect(kinds).toEqual(['RunEnqueued', 'AgentInvoked', 'ProviderRequestSent', 'ProviderResponseReceived', 'TokensConsumed', 'AgentResponseReceived', 'RunCompleted']);
    } finally {
      await close();
    }
  }, 180_000);
});
