import { createClient } from '@arcflow/queue';
import type { WorkerProcess } from '@arcflow/worker';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { fixtureWorkers, redisTargets, until } from './harness.ts';

// A worker process that dies (SIGKILL) has its jobs taken over within a second, not when their
// locks expire (5 s + a stall interval): its connections close at once, and the survivors see it.

const FIXTURE = new URL('./fixtures/crash-agents.ts', import.meta.url).pathname;
const RUNS = 64;
/** Long enough that no call ends before the kill, however slowly the 64 start. */
const NAP_MS = 3_000;
/** The bound: 1.0 s after the kill (or the restarted workers being ready), plus a run's own remaining work. */
const BOUND_MS = 1_000;
/**
 * What a loaded 2-core CI machine adds: the last provider call, a stall check, spawn jitter; on the
 * 3-master Cluster under a full suite the last run has ended up to 2.9 s past the bound. The locks
 * below live a minute, so only the dead-worker detection ends the runs within this margin; the
 * exact figure is the bench's (`npm run bench -- recovery`).
 */
const MARGIN_MS = 3_500;

/**
 * Gives every job lock under the prefix a minute to live, as a long lock duration would: the jobs of
 * a dead worker can then come back in time only because its connections closed.
 */
async function lengthenLocks(reader: Redis, prefix: string): Promise<void> {
  const cluster = reader as unknown as { isCluster?: boolean; nodes(role: 'master'): Redis[] };
  for (const node of cluster.isCluster ? cluster.nodes('master') : [reader]) {
    for (const key of await node.keys(`{${prefix}*:lock`)) await node.pexpire(key, 60_000);
  }
}

for (const target of redisTargets()) {
  const { forTest } = fixtureWorkers(FIXTURE, target.url);

  describe(`a dead worker's jobs, on ${target.name}`, () => {
    /** Two workers with RUNS runs of one NAP_MS call each in flight: every call has started. */
    async function inFlight(name: string) {
      const workers = forTest(name);
      // Room for every call on one worker: on a cluster a worker's slots are shared out over 16 partitions, and the bound is for taking the calls over, not for waiting for a slot.
      const start = () => workers.start({ env: { ARCFLOW_TEST_NAP_MS: String(NAP_MS) }, args: ['--concurrency', '256'] });
      const live: WorkerProcess[] = await Promise.all([start(), start()]);
      const client = createClient({ redis: workers.url, prefix: workers.prefix });
      const runs = await Promise.all(Array.from({ length: RUNS }, (_, n) => client.enqueue({ agent: 'nap_agent', input: `nap ${n}` })));
      const pids = () => workers.reader().lrange(workers.key('nap-pids'), 0, -1);
      await until(async () => (await pids()).length >= RUNS, 30_000);
      return { workers, start, live, client, runs, pids };
    }

    it('runs the calls of one of two workers SIGKILLed with 64 runs in flight again on the other within 1.0 s', async () => {
      const { workers, live, client, runs, pids } = await inFlight('kill-one');
      try {
        const [victim, survivor] = live as [WorkerProcess, WorkerProcess];
        const onVictim = (await pids()).filter((pid) => pid === String(victim.pid)).length;
        expect(onVictim).toBeGreaterThan(0);
        const killedAt = Date.now();
        victim.kill('SIGKILL');
        await lengthenLocks(workers.reader(), workers.prefix);
        const records = await Promise.all(runs.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
        expect(records.every((record) => record.status === 'completed')).toBe(true);
        // The calls the victim held ran once more, on the survivor; none other ran twice.
        const after = (await pids()).slice(RUNS);
        expect(after.length).toBeGreaterThan(0);
        expect(after.length).toBeLessThanOrEqual(onVictim);
        expect(after.every((pid) => pid === String(survivor.pid))).toBe(true);
        const lastEnd = Math.max(...records.map((record) => record.finished_at!));
        expect(lastEnd - killedAt - NAP_MS).toBeLessThan(BOUND_MS + MARGIN_MS);
      } finally {
        await client.close();
      }
    }, 90_000);

    it('runs the calls of two workers SIGKILLed together within 1.0 s of two new workers being ready', async () => {
      const { workers, start, live, client, runs, pids } = await inFlight('kill-both');
      try {
        for (const worker of live) worker.kill('SIGKILL');
        await Promise.all(live.map((worker) => worker.exited));
        await lengthenLocks(workers.reader(), workers.prefix);
        await Promise.all([start(), start()]);
        const readyAt = Date.now();
        const records = await Promise.all(runs.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
        expect(records.every((record) => record.status === 'completed')).toBe(true);
        expect((await pids()).length).toBeGreaterThan(RUNS);
        expect((await pids()).length).toBeLessThanOrEqual(2 * RUNS);
        const lastEnd = Math.max(...records.map((record) => record.finished_at!));
        expect(lastEnd - readyAt - NAP_MS).toBeLessThan(BOUND_MS + MARGIN_MS);
      } finally {
        await client.close();
      }
    }, 90_000);
  });
}
