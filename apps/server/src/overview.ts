import type { RunRecord } from '@arcflow/core';
import { type ArcflowClient, type RunStore, keysFor } from '@arcflow/queue';
import type { Redis } from 'ioredis';
import type { AgentUsage, Overview, OverviewBucket, OverviewWindow, QueueDepth } from './overview-shape.ts';

/** The overview's windows: how far back each looks, and the width of its buckets. */
export const OVERVIEW_WINDOWS: Readonly<Record<OverviewWindow, { readonly span_ms: number; readonly bucket_ms: number }>> = Object.freeze({
  hour: Object.freeze({ span_ms: 3_600_000, bucket_ms: 60_000 }),
  day: Object.freeze({ span_ms: 86_400_000, bucket_ms: 900_000 }),
});

export const OVERVIEW_DEFAULTS = Object.freeze({
  /** Records read per request at most, newest first: the charts of runs' ends, durations and tokens cover these. */
  max_runs_read: 2_000,
  /** Records are read this many at a time, so one overview never queues thousands of commands at once. */
  read_batch: 250,
  /** Queue-depth samples: one a minute at most, kept a day (and a bucket, so the day's first bucket is whole). */
  depth_sample_ms: 60_000,
  depth_retention_ms: 86_400_000 + 900_000,
});

/** A queue-depth sample as stored (format `v: 1`): when, and each queue with any depth as `[name, waiting, active, delayed]`. */
interface DepthSample {
  v: 1;
  at: number;
  queues: [string, number, number, number][];
}

/** A stored sample, checked; undefined for a member of another format (it is left out, not trusted). */
function readSample(member: string): DepthSample | undefined {
  let value: unknown;
  try {
    value = JSON.parse(member);
  } catch {
    return undefined;
  }
  const sample = value as Partial<DepthSample> | null;
  if (sample === null || typeof sample !== 'object' || sample.v !== 1 || !Number.isSafeInteger(sample.at) || !Array.isArray(sample.queues)) return undefined;
  const counts = (entry: unknown) => Array.isArray(entry) && entry.length === 4 && typeof entry[0] === 'string' && entry.slice(1).every((n) => Number.isSafeInteger(n) && n >= 0);
  return sample.queues.every(counts) ? (sample as DepthSample) : undefined;
}

/**
 * The console's overview of the last hour or day (docs/decisions/0027-console-overview.md), read
 * on request. Runs started per bucket are counted in the runs index (exact, however many). Runs'
 * ends, durations and tokens come from the records of the runs created in the window or the one
 * before it (so a run as long as the window is counted when it ends), newest first, at most
 * `max_runs_read`. Queue depths come from samples this function writes: the first overview of a
 * minute adds the depths it reads now.
 */
export async function readOverview(
  source: { client: ArcflowClient; store: RunStore; redis: Redis; prefix: string },
  window: OverviewWindow,
  now: number,
  limits: { max_runs_read: number } = OVERVIEW_DEFAULTS,
): Promise<Overview> {
  const { span_ms, bucket_ms } = OVERVIEW_WINDOWS[window];
  const count = span_ms / bucket_ms;
  const to = (Math.floor(now / bucket_ms) + 1) * bucket_ms;
  const from = to - count * bucket_ms;
  const keys = keysFor(source.prefix);
  const indexes = (await source.store.tags()).map((tag) => keys.runsIndexIn(tag));
  const [started, ids, samples, queues] = await Promise.all([
    startedPerBucket(source.redis, indexes, from, bucket_ms, count),
    newestIds(source.redis, indexes, from - span_ms, to, limits.max_runs_read),
    source.redis.zrangebyscore(keys.overviewQueueDepths, from, to),
    source.client.queues(),
  ]);
  const records = await readRecords(source.client, ids.ids);
  const depths = samples.map(readSample).filter((sample) => sample !== undefined);
  await sampleDepths(source.redis, keys.overviewQueueDepths, depths, queues, now);
  const summary = summarize(records, { from, to, bucket_ms, started });
  return {
    window,
    from,
    to,
    bucket_ms,
    runs_in_window: started.reduce((sum, n) => sum + n, 0),
    runs_read: records.length,
    truncated: ids.truncated,
    buckets: withDepths(summary.buckets, depths, bucket_ms, from),
    duration_ms: summary.duration_ms,
    agents: summary.agents,
    queues: queues.filter((queue) => queue.waiting + queue.active + queue.delayed > 0).map(({ name, waiting, active, delayed }) => ({ name, waiting, active, delayed })),
  };
}

/** Runs created in each bucket, counted in every partition's index. */
async function startedPerBucket(redis: Redis, indexes: string[], from: number, bucket_ms: number, count: number): Promise<number[]> {
  const counts = await Promise.all(
    Array.from({ length: count }, (_, at) =>
      Promise.all(indexes.map((index) => redis.zcount(index, from + at * bucket_ms, `(${from + (at + 1) * bucket_ms}`))).then((each) => each.reduce((sum, n) => sum + n, 0)),
    ),
  );
  return counts;
}

/** The ids of the newest runs created in [from, to), at most `max`, across the partitions' indexes. */
async function newestIds(redis: Redis, indexes: string[], from: number, to: number, max: number): Promise<{ ids: string[]; truncated: boolean }> {
  const pages = await Promise.all(indexes.map((index) => redis.zrevrangebyscore(index, `(${to}`, from, 'WITHSCORES', 'LIMIT', 0, max + 1)));
  const entries = pages.flatMap((flat) => Array.from({ length: flat.length / 2 }, (_, at) => ({ run_id: flat[at * 2]!, score: Number(flat[at * 2 + 1]) })));
  entries.sort((a, b) => b.score - a.score);
  return { ids: entries.slice(0, max).map((entry) => entry.run_id), truncated: entries.length > max };
}

/** The runs' records, through the client's one reader of records; those retention removed are left out. */
async function readRecords(client: ArcflowClient, ids: string[]): Promise<RunRecord[]> {
  const records: RunRecord[] = [];
  for (let at = 0; at < ids.length; at += OVERVIEW_DEFAULTS.read_batch) {
    const batch = await Promise.all(ids.slice(at, at + OVERVIEW_DEFAULTS.read_batch).map((run_id) => client.get(run_id)));
    for (const record of batch) if (record) records.push(record);
  }
  return records;
}

/** Adds this minute's sample of the queues' depths unless one is there, and drops those older than a day. */
async function sampleDepths(redis: Redis, key: string, depths: DepthSample[], queues: QueueDepth[], now: number): Promise<void> {
  const minute = Math.floor(now / OVERVIEW_DEFAULTS.depth_sample_ms) * OVERVIEW_DEFAULTS.depth_sample_ms;
  if (depths.some((sample) => sample.at === minute)) return;
  const sample: DepthSample = {
    v: 1,
    at: minute,
    queues: queues.filter((queue) => queue.waiting + queue.active + queue.delayed > 0).map((queue) => [queue.name, queue.waiting, queue.active, queue.delayed]),
  };
  depths.push(sample);
  await redis
    .multi()
    .zadd(key, minute, JSON.stringify(sample))
    .zremrangebyscore(key, '-inf', `(${now - OVERVIEW_DEFAULTS.depth_retention_ms}`)
    .exec();
}

/** Each bucket's summed depths from the last sample in it (two `serve`s may both sample a minute: the last one read wins). */
function withDepths(buckets: OverviewBucket[], depths: DepthSample[], bucket_ms: number, from: number): OverviewBucket[] {
  for (const sample of depths.sort((a, b) => a.at - b.at)) {
    const bucket = buckets[Math.floor((sample.at - from) / bucket_ms)];
    if (!bucket) continue;
    bucket.waiting = sample.queues.reduce((sum, queue) => sum + queue[1], 0);
    bucket.active = sample.queues.reduce((sum, queue) => sum + queue[2], 0);
    bucket.delayed = sample.queues.reduce((sum, queue) => sum + queue[3], 0);
  }
  return buckets;
}

/**
 * The runs' ends per bucket by status, the durations (enqueue to end) of those that ended in each
 * bucket and in the whole window (p50 and p95, nearest rank), and each agent's and workflow's
 * tokens and cost over the runs that ended in the window. Pure: the route reads, this counts.
 */
export function summarize(
  records: readonly RunRecord[],
  frame: { from: number; to: number; bucket_ms: number; started: readonly number[] },
): { buckets: OverviewBucket[]; duration_ms: Overview['duration_ms']; agents: AgentUsage[] } {
  const { from, to, bucket_ms, started } = frame;
  const buckets: OverviewBucket[] = started.map((n, at) => ({
    at: from + at * bucket_ms,
    started: n,
    completed: 0,
    failed: 0,
    cancelled: 0,
    p50_ms: null,
    p95_ms: null,
    waiting: null,
    active: null,
    delayed: null,
  }));
  const perBucket: number[][] = buckets.map(() => []);
  const all: number[] = [];
  const agents = new Map<string, AgentUsage>();
  for (const run of records) {
    if (run.finished_at === undefined || run.finished_at < from || run.finished_at >= to) continue;
    if (run.status !== 'completed' && run.status !== 'failed' && run.status !== 'cancelled') continue;
    const at = Math.floor((run.finished_at - from) / bucket_ms);
    const bucket = buckets[at]!;
    bucket[run.status] += 1;
    const ms = Math.max(0, run.finished_at - run.created_at);
    perBucket[at]!.push(ms);
    all.push(ms);
    const name = run.workflow ?? run.agent ?? '';
    const key = `${run.workflow ? 'workflow' : 'agent'}|${name}`;
    const usage: AgentUsage = agents.get(key) ?? { name, kind: run.workflow ? 'workflow' : 'agent', runs: 0, tokens: { input: 0, output: 0, total: 0 } };
    usage.runs += 1;
    usage.tokens.input += run.usage.input;
    usage.tokens.output += run.usage.output;
    usage.tokens.total += run.usage.total;
    const cost = (run.usage as { cost_usd?: unknown }).cost_usd;
    if (typeof cost === 'number' && Number.isFinite(cost)) usage.cost_usd = (usage.cost_usd ?? 0) + cost;
    agents.set(key, usage);
  }
  for (const [at, durations] of perBucket.entries()) {
    buckets[at]!.p50_ms = percentile(durations, 0.5);
    buckets[at]!.p95_ms = percentile(durations, 0.95);
  }
  return {
    buckets,
    duration_ms: { p50: percentile(all, 0.5), p95: percentile(all, 0.95), runs: all.length },
    agents: [...agents.values()].sort((a, b) => b.tokens.total - a.tokens.total || a.name.localeCompare(b.name)),
  };
}

/** The nearest-rank percentile of the values; null for none. */
export function percentile(values: readonly number[], share: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(share * sorted.length) - 1)]!;
}
