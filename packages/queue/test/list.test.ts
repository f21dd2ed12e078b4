import { Agent, newRunId, silentLogger } from '@arcflow/core';
import { createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, reply, scriptedProvider, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { partitionedRunId } from '../src/redis/partitions.ts';
import { RunStore } from '../src/runs/run-store.ts';
import { FAST, testResources } from './harness.ts';

const { prefixes, open, redis } = testResources();

describe('listing runs', () => {
  it('lists runs newest first, by agent and by status, in pages that cover every run once', async () => {
    const prefix = testPrefix('list');
    prefixes.push(prefix);
    const alpha = new Agent({ name: 'alpha' });
    const beta = new Agent({ name: 'beta' });
    const worker = await startWorker({
      agents: [alpha, beta],
      provider: scriptedProvider([reply('ok')], { repeat: true }),
      redis: TEST_REDIS_URL,
      prefix,
      logger: silentLogger,
      ...FAST,
    });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const ids: string[] = [];
    for (let index = 0; index < 7; index += 1) {
      const { run_id } = await client.enqueue({ agent: index % 2 === 0 ? 'alpha' : 'beta', input: `run ${index}` });
      await client.wait(run_id, { timeout_ms: 10_000 });
      ids.push(run_id);
    }
    const cancelled = await client.enqueue({ agent: 'alpha', input: 'cancel me', exec_config: { test: { steps: { s1: { responses: [] } } } } });
    await client.cancel(cancelled.run_id);
    ids.push(cancelled.run_id);

    const all = await client.list();
    expect(all.runs.map((run) => run.run_id)).toEqual([...ids].reverse());
    expect(all.next_cursor).toBeUndefined();
    expect(all.runs[0]).toMatchObject({ agent: 'alpha' });

    const pages: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.list({ limit: 3, cursor });
      expect(page.runs.length).toBeLessThanOrEqual(3);
      pages.push(...page.runs.map((run) => run.run_id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(pages).toEqual([...ids].reverse());
    // A page that ends at the last run says no more follow: no cursor (8 runs, pages of 4).
    const second = await client.list({ limit: 4, cursor: (await client.list({ limit: 4 })).next_cursor });
    expect(second.runs).toHaveLength(4);
    expect(second.next_cursor).toBeUndefined();
    expect((await client.list({ limit: 8 })).next_cursor).toBeUndefined();
    expect((await client.list({ limit: 7 })).next_cursor).toBeDefined();

    expect((await client.list({ agent: 'beta' })).runs.map((run) => run.run_id)).toEqual([ids[5], ids[3], ids[1]]);
    expect((await client.list({ status: 'cancelled' })).runs.map((run) => run.run_id)).toEqual([cancelled.run_id]);
    expect((await client.list({ status: 'completed', agent: 'alpha', limit: 2 })).runs.map((run) => run.run_id)).toEqual([ids[6], ids[4]]);

    // A run whose record retention removed leaves the listing (and its index).
    await redis.del(keysFor(prefix).record(ids[6]!));
    expect((await client.list({ agent: 'alpha' })).runs.map((run) => run.run_id)).not.toContain(ids[6]);
    expect(await redis.zscore(keysFor(prefix).runsIndexIn(keysFor(prefix).tag, 'alpha'), ids[6]!)).toBeNull();
  });

  it.each([
    [1, 'runs of one millisecond'],
    [16, 'runs interleaved over them'],
  ] as const)(
    'gives a cursor past runs that do not match, so following cursors (and a bulk action) reaches a match 8,000 runs down (%i partitions: %s)',
    async (partitions, spread) => {
      const prefix = testPrefix(`list-far-${partitions}`);
      prefixes.push(prefix);
      const store = new RunStore(redis, prefix, 600);
      if (partitions > 1) await store.partitions.ensure(partitions);
      const idIn = (k: number) => (partitions > 1 ? partitionedRunId(k) : newRunId());
      const create = (run_id: string, tenant: string) =>
        store.createRun({ run_id, agent: 'far', input: 'x', config: null, exec_config: null, trace: {}, definition_hash: '', tenant }, undefined, {
          kind: 'RunEnqueued',
          step_id: 's1',
          agent: 'far',
        });
      const rare = idIn(0);
      await create(rare, 'rare');
      const busy = Array.from({ length: 8_100 }, (_, i) => idIn(i % partitions));
      for (let from = 0; from < busy.length; from += 500) await Promise.all(busy.slice(from, from + 500).map((run_id) => create(run_id, 'busy')));
      // The busy runs are newer than the rare one: all in one millisecond (no page can end between two of
      // them by time alone), or one a millisecond per partition in turn (each index holds a share of every page).
      const keys = keysFor(prefix);
      const later = Number(await redis.zscore(keys.runsIndexIn(keys.tagOf(rare)), rare)) + 1;
      const createdAt = (i: number) => (spread === 'runs of one millisecond' ? later : later + Math.floor(i / partitions));
      for (let k = 0; k < partitions; k += 1) {
        const inIndex = busy.flatMap((run_id, i) => (i % partitions === k ? [createdAt(i), run_id] : []));
        await redis.zadd(keys.runsIndexIn(keys.tagOf(busy[k]!)), ...inIndex);
      }
      const client = createClient({ redis: TEST_REDIS_URL, prefix });
      open.push(client);
      const found: string[] = [];
      let pages = 0;
      let cursor: string | undefined;
      do {
        const page = await client.list({ tenant: 'rare', limit: 1, ...(cursor ? { cursor } : {}) });
        found.push(...page.runs.map((run) => run.run_id));
        cursor = page.next_cursor;
        pages += 1;
      } while (cursor !== undefined);
      expect(found).toEqual([rare]);
      expect(pages).toBeGreaterThan(1);
      expect(await client.bulk({ action: 'cancel', filter: { status: 'queued', tenant: 'rare' }, dry_run: true })).toMatchObject({ matched: 1, run_ids: [rare] });
    },
    60_000,
  );

  it('refuses a listing query that is not of its form', async () => {
    const client = createClient({ redis: TEST_REDIS_URL, prefix: testPrefix('list-bad') });
    open.push(client);
    await expect(client.list({ status: 'done' as never })).rejects.toThrow(/status must be one of/);
    await expect(client.list({ limit: 0 })).rejects.toThrow(/limit must be an integer from 1 to 1000/);
    await expect(client.list({ agent: 'a:b' })).rejects.toThrow(/agent must match/);
    await expect(client.list({ cursor: 'nonsense' })).rejects.toThrow(/cursor is not one a listing returned/);
  });

  it('lists the registered agents with their tools and live workers, and suggests the nearest name for an unknown one', async () => {
    const prefix = testPrefix('agents');
    prefixes.push(prefix);
    const worker = await startWorker({
      agents: [new Agent({ name: 'researcher' })],
      provider: scriptedProvider([reply('ok')], { repeat: true }),
      redis: TEST_REDIS_URL,
      prefix,
      logger: silentLogger,
      ...FAST,
    });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    expect(await client.agents()).toEqual([{ name: 'researcher', kind: 'agent', tools: [], live_workers: 1 }]);
    await expect(client.enqueue({ agent: 'reseacher', input: 'hi' })).rejects.toThrow("unknown agent 'reseacher' (did you mean 'researcher'?)");
    await expect(client.enqueue({ agent: 'zzz', input: 'hi' })).rejects.toThrow(/^unknown agent 'zzz': no worker has registered it under prefix '.*' \(known: researcher;/);
    await worker.close();
    expect((await client.agents())[0]).toMatchObject({ name: 'researcher', live_workers: 0 });
    // Known, with no live worker: accepted, and waits.
    const { run_id } = await client.enqueue({ agent: 'researcher', input: 'hi' });
    expect(await client.get(run_id)).toMatchObject({ status: 'queued' });
  });
});
