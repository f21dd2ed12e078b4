import type { QueueReading, RunCountReading } from '@arcflow/telemetry';
import type { ChainableCommander, Redis } from 'ioredis';
import { RUN_COUNTS_SUFFIX } from '../redis/keys.ts';
import { loadScript } from '../redis/scripts.ts';
import { DEFAULT_TENANT } from '../tenancy/options.ts';

/** What a run's tenant is counted as when no worker's tenant option names it (SPEC §18). */
const OTHER_TENANT = '_OTHER';

/** The queues a collection reads: their names, and the tags (partitions) each lives under. */
export interface QueueLayout {
  readonly names: readonly string[];
  readonly tags: readonly string[];
}

/** Whether a collection reads the deployment's run counts, and the tenants it names (the rest are counted as `_OTHER`). */
export interface RunCountOptions {
  readonly runs?: boolean;
  /** The tenants the workers' options name (`default` is always named). */
  readonly tenants?: ReadonlySet<string>;
}

/** What one collection read. */
export interface CollectedReadings {
  readonly queues: QueueReading[];
  /** With `runs` asked for: the deployment's runs ended (see RUN_COUNTS_SUFFIX). */
  readonly runs?: RunCountReading[];
}

const QUEUE_DEPTHS = loadScript(new URL('./', import.meta.url), 'queueDepths');
const DEPTH_KEYS = ['wait', 'prioritized', 'active', 'delayed'] as const;

type DepthCommander = { queueDepths(numberOfKeys: number, ...keys: string[]): Promise<number[]> };

/**
 * Reads queue depths and live workers (and the deployment's run counts) from Redis in one round
 * trip, whatever the number of queues: one pipeline holding one script over every queue's keys,
 * `CLIENT LIST` (BullMQ names each worker's connection after its queue, as `getWorkersCount`
 * reads it) and, for run counts, each partition's counter hash. On a Redis Cluster, where one
 * script may not span slots, each partition's script and each node's client list go out side by
 * side instead: one round trip per node, at the same time.
 */
export async function collectReadings(redis: Redis, layout: QueueLayout, options: RunCountOptions = {}): Promise<CollectedReadings> {
  ensureScript(redis);
  const groups = layout.tags.map((tag) => ({ tag, keys: layout.names.flatMap((name) => DEPTH_KEYS.map((kind) => `${tag}:${name}:${kind}`)) }));
  const isCluster = (redis as unknown as { isCluster?: boolean }).isCluster === true;
  let depths: number[][];
  let clientLists: string[];
  let runHashes: Record<string, string>[] = [];
  if (!isCluster) {
    const pipeline = redis.pipeline() as ChainableCommander & DepthCommander;
    const keys = groups.flatMap((group) => group.keys);
    if (keys.length > 0) pipeline.queueDepths(keys.length, ...keys);
    pipeline.client('LIST');
    if (options.runs) for (const tag of layout.tags) pipeline.hgetall(tag + RUN_COUNTS_SUFFIX);
    const replies = (await pipeline.exec()) ?? [];
    for (const [error] of replies) if (error) throw error;
    const values = replies.map(([, value]) => value);
    const flat = keys.length > 0 ? (values.shift() as number[]) : [];
    const perTag = layout.names.length * 3;
    depths = groups.map((_, index) => flat.slice(index * perTag, (index + 1) * perTag));
    clientLists = [values.shift() as string];
    runHashes = values as Record<string, string>[];
  } else {
    const commander = redis as unknown as Redis & DepthCommander & { nodes(role: 'master'): Redis[] };
    [depths, clientLists, runHashes] = await Promise.all([
      Promise.all(groups.map((group) => (group.keys.length > 0 ? commander.queueDepths(group.keys.length, ...group.keys) : Promise.resolve([])))),
      Promise.all(commander.nodes('master').map((node) => node.client('LIST') as Promise<string>)),
      options.runs ? Promise.all(layout.tags.map((tag) => redis.hgetall(tag + RUN_COUNTS_SUFFIX))) : Promise.resolve([]),
    ]);
  }
  const workers = workersByConnection(clientLists);
  const queues = layout.names.map((name, position) => {
    const reading = { queue: name, waiting: 0, active: 0, delayed: 0, workers: 0 };
    for (const [index, tag] of layout.tags.entries()) {
      const counts = depths[index] ?? [];
      reading.waiting += Number(counts[position * 3] ?? 0);
      reading.active += Number(counts[position * 3 + 1] ?? 0);
      reading.delayed += Number(counts[position * 3 + 2] ?? 0);
      // A queue is one per partition; its workers are those of its busiest partition (as `/v1/queues` counts them).
      reading.workers = Math.max(reading.workers, workers.get(`${tag}:${Buffer.from(name).toString('base64')}`) ?? 0);
    }
    return reading;
  });
  return options.runs ? { queues, runs: runCounts(runHashes, options.tenants ?? new Set()) } : { queues };
}

function ensureScript(redis: Redis): void {
  if (typeof (redis as unknown as Partial<DepthCommander>).queueDepths !== 'function') redis.defineCommand('queueDepths', { lua: QUEUE_DEPTHS });
}

/** Connections per BullMQ client name, a worker's `:w:<name>` suffix taken off. */
function workersByConnection(lists: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const list of lists) {
    for (const line of list.split('\n')) {
      const match = / name=(\S+)/.exec(line);
      if (!match) continue;
      const name = match[1]!;
      const named = name.indexOf(':w:');
      const base = named > 0 ? name.slice(0, named) : name;
      counts.set(base, (counts.get(base) ?? 0) + 1);
    }
  }
  return counts;
}

/**
 * The counter hashes' fields (`agent|<name>|<status>`, and `|<tenant>` for a tenant other than
 * `default`), summed over partitions and over the tenants not in `tenants`, which are `_OTHER`.
 */
function runCounts(hashes: readonly Record<string, string>[], tenants: ReadonlySet<string>): RunCountReading[] {
  const totals = new Map<string, RunCountReading & { count: number }>();
  for (const hash of hashes) {
    for (const [field, count] of Object.entries(hash)) {
      const [kind, name, status, tenant = DEFAULT_TENANT] = field.split('|');
      if ((kind !== 'agent' && kind !== 'workflow') || !name || !status) continue;
      const label = tenant === DEFAULT_TENANT || tenants.has(tenant) ? tenant : OTHER_TENANT;
      const key = `${kind}|${name}|${status}|${label}`;
      const total = totals.get(key) ?? { kind, name, status, tenant: label, count: 0 };
      total.count += Number(count);
      totals.set(key, total);
    }
  }
  return [...totals.values()];
}
