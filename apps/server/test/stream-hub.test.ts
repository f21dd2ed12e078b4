import type { StreamChunk } from '@arcflow/core';
import { RunStore, connectRedis, duplicateRedis, keysFor } from '@arcflow/queue';
import { type PrivateCluster, TEST_REDIS_URL, cleanupPrefix, startPrivateRedis, testCluster, testPrefix } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HUB_BLOCK_MS, StreamHub } from '../src/stream-hub.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A hub over `url` under a fresh prefix, counting the reader connections it opens, and a writer of stream entries as the store's scripts write them. */
function hubOn(url: string, name: string) {
  const prefix = testPrefix(name);
  const redis = connectRedis(url);
  redis.on('error', () => undefined);
  const store = new RunStore(redis, prefix, 3_600);
  const readers: Redis[] = [];
  const errors: unknown[] = [];
  const hub = new StreamHub(
    store,
    redis,
    () => {
      // As serve opens it: a read fails once its connection has failed to come back.
      const reader = duplicateRedis(redis, { maxRetriesPerRequest: 1 });
      reader.on('error', () => undefined);
      readers.push(reader);
      return reader;
    },
    (error) => errors.push(error),
  );
  const keys = keysFor(prefix);
  return {
    prefix,
    redis,
    hub,
    readers,
    errors,
    /** Marks the run as running (its record's status), as a worker would. */
    running: (run_id: string) => redis.hset(keys.record(run_id), 'status', 'running'),
    text: (run_id: string, offset: number, delta = `t${offset} `) =>
      redis.xadd(keys.run(run_id).stream, `0-${offset}`, 'c', JSON.stringify({ type: 'text', step_id: 's1', iteration: 1, attempt: 1, delta })),
    end: (run_id: string, offset: number) => redis.xadd(keys.run(run_id).stream, `0-${offset}`, 'c', JSON.stringify({ type: 'end', status: 'completed' })),
    close: async () => {
      await hub.close();
      // A private cluster goes with its keys.
      if (url === TEST_REDIS_URL) await cleanupPrefix(prefix);
      redis.disconnect();
    },
  };
}

/** A viewer that keeps what it is sent and whether (and how) it was finished. */
function viewer() {
  const chunks: StreamChunk[] = [];
  const times: number[] = [];
  const state = { finished: false, error: undefined as unknown };
  return {
    chunks,
    times,
    state,
    viewer: {
      deliver: (delivered: readonly StreamChunk[]) => {
        for (const chunk of delivered) {
          chunks.push(chunk);
          times.push(performance.now());
        }
      },
      drained: () => Promise.resolve(),
      finish: (error?: unknown) => {
        state.finished = true;
        state.error = error;
      },
    },
  };
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error('timed out');
    await sleep(5);
  }
}

/** A new run followed, its first chunk written 50 ms later: how long after the write the viewer had it. */
async function firstChunkAfter(setup: ReturnType<typeof hubOn>, run_id: string, timeoutMs: number): Promise<number> {
  await setup.running(run_id);
  const seen = viewer();
  setup.hub.follow(run_id, 0, seen.viewer);
  await sleep(50);
  const written = performance.now();
  await setup.text(run_id, 1);
  await until(() => seen.chunks.length === 1, timeoutMs);
  return seen.times[0]! - written;
}

describe('the stream hub on one Redis (SPEC §19)', () => {
  let setup: ReturnType<typeof hubOn>;
  afterEach(() => setup?.close());

  it('reads a run followed while the shared read blocks on another at once, through one reader connection for every run', async () => {
    setup = hubOn(TEST_REDIS_URL, 'hub-wake');
    await setup.running('run_a');
    const a = viewer();
    setup.hub.follow('run_a', 0, a.viewer);
    // The shared read now blocks on run_a's stream alone, for up to HUB_BLOCK_MS.
    await sleep(150);
    expect(await firstChunkAfter(setup, 'run_b', HUB_BLOCK_MS)).toBeLessThan(HUB_BLOCK_MS / 4);
    // Twenty more runs, five viewers each: still the one reader.
    const more = Array.from({ length: 20 }, (_, index) => `run_m${index}`);
    const viewers = more.flatMap((run_id) => Array.from({ length: 5 }, () => ({ run_id, seen: viewer() })));
    for (const { run_id, seen } of viewers) setup.hub.follow(run_id, 0, seen.viewer);
    await sleep(50);
    await Promise.all(more.map((run_id) => setup.text(run_id, 1)));
    await until(() => viewers.every(({ seen }) => seen.chunks.length === 1), HUB_BLOCK_MS);
    expect(setup.readers).toHaveLength(1);
    expect(setup.hub.followed).toEqual({ runs: 22, viewers: 102 });
    expect(setup.errors).toEqual([]);
  });

  it('where an ACL refuses CLIENT UNBLOCK, reads a newly followed run within a short blocking read instead, and reports no error', async () => {
    const admin = new Redis(TEST_REDIS_URL);
    const user = `hub-acl-${process.pid}`;
    await admin.call('ACL', 'SETUSER', user, 'reset', 'on', '>hub-acl-password', '~*', '&*', '+@all', '-client|unblock');
    const url = new URL(TEST_REDIS_URL);
    url.username = user;
    url.password = 'hub-acl-password';
    try {
      setup = hubOn(url.toString(), 'hub-acl');
      await setup.running('run_a');
      setup.hub.follow('run_a', 0, viewer().viewer);
      await sleep(150);
      // The first refusal is met while the read blocks for its full length: it ends within one.
      await firstChunkAfter(setup, 'run_b', 2 * HUB_BLOCK_MS);
      // From then on, reads block briefly: a new run's chunk comes at once.
      expect(await firstChunkAfter(setup, 'run_c', HUB_BLOCK_MS)).toBeLessThan(HUB_BLOCK_MS / 4);
      expect(setup.errors).toEqual([]);
    } finally {
      await admin.call('ACL', 'DELUSER', user);
      await admin.quit();
    }
  });

  it('reads on after Redis comes back, losing nothing, and reports a failing read once per outage', async () => {
    const own = await startPrivateRedis({ durable: true });
    try {
      setup = hubOn(own.url, 'hub-outage');
      await setup.running('run_o');
      const seen = viewer();
      setup.hub.follow('run_o', 0, seen.viewer);
      await setup.text('run_o', 1);
      await until(() => seen.chunks.length === 1, 1_000);
      await own.kill();
      // Several reads' worth of failures (one each 500 ms).
      await sleep(2_500);
      await own.start();
      await setup.text('run_o', 2);
      await setup.end('run_o', 3);
      await until(() => seen.chunks.length === 3, 10_000);
      expect(seen.chunks.map((chunk) => chunk.offset)).toEqual([1, 2, 3]);
      expect(setup.errors).toHaveLength(1);
    } finally {
      await setup.close();
      await own.close();
    }
  }, 20_000);

  it('gives every viewer, whenever it comes and from whatever offset, each chunk after its offset once and in order, until the end', async () => {
    setup = hubOn(TEST_REDIS_URL, 'hub-joins');
    await setup.running('run_j');
    const total = 200;
    const joined: { after: number; seen: ReturnType<typeof viewer>; stop: () => void }[] = [];
    const join = (after: number) => {
      const seen = viewer();
      joined.push({ after, seen, stop: setup.hub.follow('run_j', after, seen.viewer) });
    };
    join(0);
    for (let offset = 1; offset < total; offset += 1) {
      await setup.text('run_j', offset);
      if (offset % 7 === 0) join(0);
      if (offset % 11 === 0) join(Math.floor(offset / 2));
      if (offset % 3 === 0) await sleep(2);
    }
    await setup.end('run_j', total);
    await until(() => joined.every(({ seen }) => seen.chunks.at(-1)?.type === 'end'), 10_000);
    for (const { after, seen } of joined) expect(seen.chunks.map((chunk) => chunk.offset)).toEqual(Array.from({ length: total - after }, (_, index) => after + index + 1));
    expect(setup.readers).toHaveLength(1);
    // The last viewer gone, the run is no longer followed.
    for (const { stop } of joined) stop();
    expect(setup.hub.followed).toEqual({ runs: 0, viewers: 0 });
  });

  it('fans a chunk out to many slow viewers in slices that let other work in, each viewer still getting every chunk once and in order', async () => {
    setup = hubOn(TEST_REDIS_URL, 'hub-slices');
    await setup.running('run_s');
    const seen = Array.from({ length: 300 }, () => viewer());
    for (const each of seen) {
      const deliver = each.viewer.deliver;
      // About 0.1 ms a viewer: one chunk's fan-out takes several slices.
      const slow = (chunks: readonly StreamChunk[]) => {
        const until = performance.now() + 0.1;
        while (performance.now() < until);
        deliver(chunks);
      };
      setup.hub.follow('run_s', 0, { ...each.viewer, deliver: slow });
    }
    await sleep(100);
    const ticks: number[] = [];
    const ticking = setInterval(() => ticks.push(performance.now()), 1);
    try {
      for (let offset = 1; offset <= 5; offset += 1) await setup.text('run_s', offset);
      await setup.end('run_s', 6);
      await until(() => seen.every((each) => each.chunks.at(-1)?.type === 'end'), 20_000);
    } finally {
      clearInterval(ticking);
    }
    for (const each of seen) expect(each.chunks.map((chunk) => chunk.offset)).toEqual([1, 2, 3, 4, 5, 6]);
    // A timer ran while the first chunk went from its first viewer to its last.
    const firstAt = seen[0]!.times[0]!;
    const lastAt = seen.at(-1)!.times[0]!;
    expect(lastAt - firstAt).toBeGreaterThan(20);
    expect(ticks.some((at) => at > firstAt && at < lastAt)).toBe(true);
  }, 30_000);

  it('ends the viewers of a run that ended without an end chunk, or is gone, once its stream has been quiet for a blocking read', async () => {
    setup = hubOn(TEST_REDIS_URL, 'hub-quiet');
    await setup.running('run_ended');
    await setup.running('run_gone');
    const ended = viewer();
    const gone = viewer();
    setup.hub.follow('run_ended', 0, ended.viewer);
    setup.hub.follow('run_gone', 0, gone.viewer);
    await setup.text('run_ended', 1);
    await until(() => ended.chunks.length === 1, 1_000);
    await setup.redis.hset(keysFor(setup.prefix).record('run_ended'), 'status', 'completed');
    await setup.redis.del(keysFor(setup.prefix).record('run_gone'));
    await until(() => ended.state.finished && gone.state.finished, 3 * HUB_BLOCK_MS);
    expect(ended.state.error).toBeUndefined();
    expect(gone.state.error).toMatchObject({ code: 'unknown_run' });
    expect(setup.hub.followed).toEqual({ runs: 0, viewers: 0 });
    // A viewer of a run that had ended when it came reads what is stored, then is finished.
    const late = viewer();
    setup.hub.follow('run_ended', 0, late.viewer, true);
    await until(() => late.state.finished, 1_000);
    expect(late.chunks.map((chunk) => chunk.offset)).toEqual([1]);
  }, 15_000);

  it('replays a compacted run (its stream folded into its archive) to the end, to a viewer that came after its end or while it looked live', async () => {
    setup = hubOn(TEST_REDIS_URL, 'hub-compacted');
    const keys = keysFor(setup.prefix);
    const record = keys.record('run_c');
    await setup.running('run_c');
    for (let offset = 1; offset <= 3; offset += 1) await setup.text('run_c', offset);
    await setup.end('run_c', 4);
    await setup.redis.hset(record, 'status', 'completed', 'agent', 'a');
    await setup.redis.sadd(`${record}:keys`, keys.run('run_c').stream);
    expect(await new RunStore(setup.redis, setup.prefix, 3_600).compactRun('run_c')).toBe(true);
    expect(await setup.redis.exists(keys.run('run_c').stream)).toBe(0);
    const late = viewer();
    setup.hub.follow('run_c', 0, late.viewer, true);
    // Followed as live (its viewer read its status before its end): where its stream ends is read from the archive too.
    const live = viewer();
    setup.hub.follow('run_c', 2, live.viewer);
    await until(() => late.state.finished && live.state.finished, 2 * HUB_BLOCK_MS);
    expect(late.chunks.map((chunk) => chunk.offset)).toEqual([1, 2, 3, 4]);
    expect(late.chunks.at(-1)).toMatchObject({ type: 'end', status: 'completed' });
    expect(live.chunks.map((chunk) => chunk.offset)).toEqual([3, 4]);
    expect(live.state.error).toBeUndefined();
    expect(setup.hub.followed).toEqual({ runs: 0, viewers: 0 });
  }, 15_000);
});

describe('the stream hub on a 3-master Redis Cluster (SPEC §9, §19)', () => {
  let cluster: PrivateCluster;
  beforeAll(async () => {
    cluster = await testCluster(3);
  }, 60_000);
  afterAll(() => cluster?.close());

  it('reads runs of every partition, polling each partition with followed runs on the command connection, and opens no reader', async () => {
    const setup = hubOn(cluster.url, 'hub-cluster');
    try {
      const runs = Array.from({ length: 6 }, (_, k) => `run_p${k}_hub${k}`);
      const seen = runs.map(() => viewer());
      await Promise.all(runs.map((run_id) => setup.running(run_id)));
      for (const [index, run_id] of runs.entries()) setup.hub.follow(run_id, 0, seen[index]!.viewer);
      for (let offset = 1; offset <= 20; offset += 1) await Promise.all(runs.map((run_id) => setup.text(run_id, offset)));
      await Promise.all(runs.map((run_id) => setup.end(run_id, 21)));
      await until(() => seen.every((each) => each.chunks.at(-1)?.type === 'end'), 5_000);
      for (const each of seen) expect(each.chunks.map((chunk) => chunk.offset)).toEqual(Array.from({ length: 21 }, (_, index) => index + 1));
      expect(new Set(runs.map((run_id) => keysFor(setup.prefix).tagOf(run_id))).size).toBe(6);
      expect(setup.readers).toHaveLength(0);
      expect(setup.errors).toEqual([]);
    } finally {
      await setup.close();
    }
  });
});
