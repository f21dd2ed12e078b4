import type { TraceEvent } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { type FakeOpenAIServer, type FakeTurn, assertEventInvariants, startFakeOpenAI } from '@arcflow/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { collect, fixtureWorkers, until as untilEvery } from './harness.ts';

// Fallbacks (SPEC §16) across a SIGKILL, with real worker processes: which model a call is on
// follows from the call's position, recorded in Redis with each failed try, which survives the
// worker; a recorded response is never requested again. The primary fails 503 five times (the worker's default
// attempts, with its default backoff: about 11 s), so each test takes some 20 s.

const FIXTURE = new URL('./fixtures/model-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);
const until = (check: () => Promise<boolean>) => untilEvery(check, 40_000, 50);
const servers: FakeOpenAIServer[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

async function setup(name: string, primaryTurns: { turns?: FakeTurn[]; fallback?: () => FakeTurn }, backupTurns: { turns?: FakeTurn[]; fallback?: () => FakeTurn }) {
  const primary = await startFakeOpenAI(primaryTurns);
  const backup = await startFakeOpenAI(backupTurns);
  servers.push(primary, backup);
  const workers = forTest(name);
  const env = { PRIMARY_URL: primary.url, BACKUP_URL: backup.url, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
  const client = createClient({ redis: workers.url, prefix: workers.prefix });
  return { primary, backup, client, start: () => workers.start({ env }), executions: workers.executions };
}

const requestsSent = (events: TraceEvent[]) => events.flatMap((event) => (event.kind === 'ProviderRequestSent' ? [`${event.provider_id}/${event.model_id}`] : []));
const FIVE_503: FakeTurn[] = Array.from({ length: 5 }, () => ({ type: 'status', status: 503 }));

describe('fallbacks across a killed worker', () => {
  it('resumes a call at the fallback it had reached when its worker was killed mid-call: the primary is not called again', async () => {
    const { primary, backup, client, start } = await setup(
      'fallback-kill-call',
      { fallback: () => ({ type: 'status', status: 503 }) },
      { turns: [{ type: 'hang' }], fallback: () => ({ type: 'text', content: 'from the backup' }) },
    );
    const first = await start();
    const { run_id } = await client.enqueue({ agent: 'careful', input: 'go' });
    await until(async () => backup.requests.length === 1);
    expect(primary.requests).toHaveLength(5);
    first.kill('SIGKILL');
    await first.exited;
    await start();
    const run = await client.wait(run_id, { timeout_ms: 30_000 });
    expect(run).toMatchObject({ status: 'completed', output: 'from the backup' });
    expect(primary.requests).toHaveLength(5);
    expect(backup.requests).toHaveLength(2);
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(requestsSent(events)).toEqual([...Array(5).fill('primary/primary-model'), 'backup/backup-model', 'backup/backup-model']);
    expect(events.filter((event) => event.kind === 'ProviderError').map((event) => (event as { provider_id: string }).provider_id)).toEqual(Array(5).fill('primary'));
    await client.close();
  });

  it('does not request again a response the fallback gave before its worker was killed (a tool of it was running)', async () => {
    const { primary, backup, client, start, executions } = await setup(
      'fallback-kill-tool',
      { turns: [...FIVE_503, { type: 'text', content: 'done' }] },
      { turns: [{ type: 'tools', calls: [{ id: 'call_b', name: 'block', arguments: {} }] }], fallback: () => ({ type: 'status', status: 500 }) },
    );
    const first = await start();
    const { run_id } = await client.enqueue({ agent: 'careful', input: 'go' });
    await until(async () => (await executions('block')) === 1);
    first.kill('SIGKILL');
    await first.exited;
    await start();
    const run = await client.wait(run_id, { timeout_ms: 30_000 });
    expect(run).toMatchObject({ status: 'completed', output: 'done' });
    // Call 1 went to the primary five times, then to the backup once; only call 2 (with the tool's result) came after the kill.
    const isFirstCall = (body: { messages: { role: string }[] }) => !body.messages.some((message) => message.role === 'tool');
    expect(primary.requests.filter((request) => isFirstCall(request.body as { messages: { role: string }[] }))).toHaveLength(5);
    expect(backup.requests).toHaveLength(1);
    expect(primary.requests.at(-1)?.body.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_b', content: 'block done on execution 2' });
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(requestsSent(events)).toEqual([...Array(5).fill('primary/primary-model'), 'backup/backup-model', 'primary/primary-model']);
    await client.close();
  });
});
