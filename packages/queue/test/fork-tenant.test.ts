import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Agent, type ModelProvider, ProviderFailure, silentLogger } from '@arcflow/core';
import { type ArcflowClient, type WorkerOptions, createClient, startWorker } from '@arcflow/queue';
import { ARCFLOW_BIN } from '@arcflow/worker';
import { TEST_REDIS_URL, reply, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { testResources } from './harness.ts';

// A fork or retry (SPEC §15) is the same customer's work: it takes its source's tenant and
// priority (SPEC §14), one by one and in bulk; a bulk action's filter.tenant picks one tenant's runs
// (`default`: the runs enqueued with none).

const { prefixes, open } = testResources();
const agent = new Agent({ name: 'fork_tenant', instructions: 'x' });

/** A model that refuses every call while `failing.on` (the step fails), and answers `ok` after. */
function switchableModel(failing: { on: boolean }): ModelProvider {
  return {
    id: 'switchable',
    defaultModel: 'switchable-model',
    async complete() {
      if (failing.on) throw new ProviderFailure('bad_request', 'refused', { retryable: false });
      return reply('ok');
    },
  };
}

async function served(name: string, failing: { on: boolean }, tenancy: Pick<WorkerOptions, 'tenant_limits'> = {}): Promise<ArcflowClient & { prefix: string }> {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const worker = await startWorker({ agents: [agent], provider: switchableModel(failing), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...tenancy });
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(worker, client);
  return Object.assign(client, { prefix });
}

/** `arcflow <args>` on a prefix: its stdout. */
async function cli(prefix: string, ...args: string[]): Promise<string> {
  return (await promisify(execFile)(process.execPath, [ARCFLOW_BIN, ...args], { env: { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix } })).stdout;
}

async function failedRun(client: ArcflowClient, owner: { tenant?: string; priority?: number }): Promise<string> {
  const { run_id } = await client.enqueue({ agent: agent.name, input: 'go', ...owner });
  expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('failed');
  return run_id;
}

const ownerOf = async (client: ArcflowClient, run_id: string) => {
  const record = await client.get(run_id);
  return { tenant: record?.tenant, priority: record?.priority };
};

describe('fork and retry keep the tenant and priority', () => {
  it("a fork and a retry are their source's tenant's, at its priority; a source with none gives none", async () => {
    const failing = { on: true };
    const client = await served('fork-tenant', failing);
    const source = await failedRun(client, { tenant: 'acme.eu:team-1', priority: 2 });
    const plain = await failedRun(client, {});
    failing.on = false;
    const forked = await client.fork(source, { from: { iteration: 1 } });
    const retried = await client.retry(source);
    const plainRetry = await client.retry(plain);
    for (const { run_id } of [forked, retried, plainRetry]) expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    expect(await ownerOf(client, forked.run_id)).toEqual({ tenant: 'acme.eu:team-1', priority: 2 });
    expect(await ownerOf(client, retried.run_id)).toEqual({ tenant: 'acme.eu:team-1', priority: 2 });
    expect(await ownerOf(client, plainRetry.run_id)).toEqual({ tenant: undefined, priority: undefined });
    // Listed with their tenant's runs.
    expect((await client.list({ tenant: 'acme.eu:team-1' })).runs.map((run) => run.run_id).sort()).toEqual([source, forked.run_id, retried.run_id].sort());
  }, 60_000);

  it("a bulk retry by tenant retries that tenant's runs only, each into the same tenant; `default` picks the runs with none", async () => {
    const failing = { on: true };
    const client = await served('fork-tenant-bulk', failing);
    const acme = [await failedRun(client, { tenant: 'acme', priority: 1 }), await failedRun(client, { tenant: 'acme' })];
    const globex = await failedRun(client, { tenant: 'globex' });
    const plain = await failedRun(client, {});
    failing.on = false;
    const dry = await client.bulk({ action: 'retry', filter: { status: 'failed', tenant: 'acme' }, dry_run: true });
    expect({ ...dry, run_ids: [...dry.run_ids].sort() }).toEqual({ matched: 2, acted: 0, run_ids: [...acme].sort() });
    const done = await client.bulk({ action: 'retry', filter: { status: 'failed', tenant: 'acme' } });
    expect({ ...done, run_ids: [...done.run_ids].sort() }).toEqual({ matched: 2, acted: 2, run_ids: [...acme].sort() });
    expect((await client.get(globex))!.retried_by).toBeUndefined();
    expect((await client.get(plain))!.retried_by).toBeUndefined();
    const [first, second] = await Promise.all(acme.map(async (run_id) => (await client.get(run_id))!.retried_by!));
    expect(await ownerOf(client, first!)).toEqual({ tenant: 'acme', priority: 1 });
    expect(await ownerOf(client, second!)).toEqual({ tenant: 'acme', priority: undefined });
    expect(await client.bulk({ action: 'retry', filter: { status: 'failed', tenant: 'default' } })).toEqual({ matched: 1, acted: 1, run_ids: [plain] });
    expect(await ownerOf(client, (await client.get(plain))!.retried_by!)).toEqual({ tenant: undefined, priority: undefined });
    await expect(client.bulk({ action: 'retry', filter: { status: 'failed', tenant: 'no spaces' } })).rejects.toMatchObject({ code: 'invalid_request' });
  }, 60_000);

  it("a bulk retry goes on past a run its tenant's runs_per_minute refuses: matched counts it, acted does not", async () => {
    const failing = { on: true };
    const client = await served('fork-tenant-metered', failing, { tenant_limits: { metered: { runs_per_minute: 4 } } });
    // The limit counts per clock minute: start well inside one, so the enqueues and the retries share it.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_500 - intoMinute));
    const failed = [];
    for (let i = 0; i < 3; i += 1) failed.push(await failedRun(client, { tenant: 'metered' }));
    failing.on = false;
    // Three enqueues of this minute are spent: one retry fits, the other two are refused.
    const done = await client.bulk({ action: 'retry', filter: { status: 'failed', tenant: 'metered' } });
    expect(done).toMatchObject({ matched: 3, acted: 1 });
    expect(done.run_ids).toHaveLength(1);
    expect(failed).toContain(done.run_ids[0]);
  }, 60_000);

  it("retrying a run retried before, or at the same time, returns that retry without counting against its tenant's runs_per_minute", async () => {
    const failing = { on: true };
    const client = await served('fork-tenant-retried', failing, { tenant_limits: { metered: { runs_per_minute: 2 } } });
    // The limit counts per clock minute: start well inside one, so the run and its retries share it.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_500 - intoMinute));
    const source = await failedRun(client, { tenant: 'metered' });
    failing.on = false;
    // Three at once: one makes the retry and spends the minute's second run; the others get that retry.
    const [first, ...others] = await Promise.all([client.retry(source), client.retry(source), client.retry(source)]);
    for (const other of others) expect(other).toEqual(first);
    // Again, one by one: the minute is spent, and the same retry is still the answer.
    expect(await client.retry(source)).toEqual(first);
    await expect(client.enqueue({ agent: agent.name, input: 'one more', tenant: 'metered' })).rejects.toMatchObject({ code: 'tenant_rate_limited' });
  }, 90_000);

  it("a bulk cancel by tenant cancels that tenant's runs only", async () => {
    const prefix = testPrefix('fork-tenant-cancel');
    prefixes.push(prefix);
    // Registers the agent, then goes: the runs below wait in their queue.
    await (await startWorker({ agents: [agent], provider: switchableModel({ on: false }), redis: TEST_REDIS_URL, prefix, logger: silentLogger })).close();
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const acme = (await client.enqueue({ agent: agent.name, input: 'go', tenant: 'acme' })).run_id;
    const globex = (await client.enqueue({ agent: agent.name, input: 'go', tenant: 'globex' })).run_id;
    const plain = (await client.enqueue({ agent: agent.name, input: 'go' })).run_id;
    expect(await client.bulk({ action: 'cancel', filter: { status: 'queued', tenant: 'acme' } })).toEqual({ matched: 1, acted: 1, run_ids: [acme] });
    expect((await client.get(acme))!.status).toBe('cancelled');
    expect((await client.get(globex))!.status).toBe('queued');
    expect((await client.get(plain))!.status).toBe('queued');
    expect(await client.bulk({ action: 'cancel', filter: { status: 'queued', tenant: 'default' } })).toEqual({ matched: 1, acted: 1, run_ids: [plain] });
    expect((await client.get(globex))!.status).toBe('queued');
    // The same from the CLI.
    expect(await cli(prefix, 'runs', 'cancel', '--status', 'queued', '--tenant', 'globex')).toBe(`matched 1; cancelled 1\n${globex}\n`);
    expect((await client.get(globex))!.status).toBe('cancelled');
  }, 60_000);

  it("arcflow runs retry --tenant T retries that tenant's failed runs only, into the same tenant", async () => {
    const failing = { on: true };
    const client = await served('fork-tenant-cli', failing);
    const acme = await failedRun(client, { tenant: 'acme', priority: 3 });
    const globex = await failedRun(client, { tenant: 'globex' });
    failing.on = false;
    expect(JSON.parse(await cli(client.prefix, 'runs', 'retry', '--status', 'failed', '--tenant', 'acme', '--json'))).toEqual({ matched: 1, acted: 1, run_ids: [acme] });
    expect(await ownerOf(client, (await client.get(acme))!.retried_by!)).toEqual({ tenant: 'acme', priority: 3 });
    expect((await client.get(globex))!.retried_by).toBeUndefined();
  }, 60_000);
});
