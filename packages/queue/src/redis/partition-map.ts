import { ConfigError } from '@arcflow/core';
import type { Redis } from 'ioredis';
import type { Keys } from './keys.ts';
import { partitionTag } from './partitions.ts';

/** The partition count now, and every count above 1 it has had (oldest first). */
export interface PartitionState {
  readonly count: number;
  readonly history: readonly number[];
}

/** The most partitions a deployment may have. */
export const MAX_PARTITIONS = 1_024;

/** How long a process reuses what it read of the map (so a long-lived client follows a change within this). */
const REREAD_MS = 5_000;

// Grows the count, never shrinks it (runs stay in their partitions for life); returns the count in force.
const GROW = `
local stored = redis.call('GET', KEYS[1]) or '1'
local current = tonumber(stored)
if not current then return redis.error_reply('ERR arcflow: the partition map ' .. KEYS[1] .. ' holds ' .. string.sub(stored, 1, 40) .. ', not a partition count') end
local wanted = tonumber(ARGV[1])
if wanted > current then
  redis.call('SET', KEYS[1], wanted)
  redis.call('RPUSH', KEYS[2], wanted)
  return wanted
end
return current`;

/**
 * The partition map under the prefix's own tag: how many partitions new runs spread over, and
 * every count there has been (so an idempotency key is found wherever it was first used, and a
 * worker serves every partition a run may still live in). Workers create and grow it from
 * `ARCFLOW_PARTITIONS`; clients only read it.
 */
export class PartitionMap {
  private cached: { state: PartitionState; at: number } | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly prefix: string,
  ) {}

  async read(fresh = false): Promise<PartitionState> {
    if (!fresh && this.cached && Date.now() - this.cached.at < REREAD_MS) return this.cached.state;
    const [count, history] = await Promise.all([this.redis.get(this.keys.partitions), this.redis.lrange(this.keys.partitionHistory, 0, -1)]);
    const state = {
      count: count === null ? 1 : storedCount(this.keys.partitions, count),
      history: history.map((past) => storedCount(this.keys.partitionHistory, past)),
    };
    // No map yet (no worker has started under the prefix): read again next time, so runs spread as soon as one does.
    this.cached = count === null ? undefined : { state, at: Date.now() };
    return state;
  }

  /** Makes the count at least `wanted` (a worker's ARCFLOW_PARTITIONS); returns the map as it stands. */
  async ensure(wanted: number): Promise<PartitionState> {
    // A power of two spaces the partitions' slots evenly, so every master of a cluster gets some.
    if (!isPartitionCount(wanted)) {
      throw new ConfigError(`partitions must be a power of two from 1 to ${MAX_PARTITIONS} (1, 2, 4, … 1024), got ${wanted}`);
    }
    // What is there must be a map before it grows (the script checks again).
    const current = await this.read(true);
    if (wanted <= current.count) return current;
    await this.redis.eval(GROW, 2, this.keys.partitions, this.keys.partitionHistory, wanted);
    return this.read(true);
  }

  /**
   * Every tag a run may live under: the prefix's own and each partition's that ever was; with
   * `only`, the partitions among those it names (the prefix's own tag always).
   */
  tagsOf(state: PartitionState, only?: ReadonlySet<number>): string[] {
    const most = Math.max(state.count, ...state.history, 1);
    const partitions = most > 1 ? Array.from({ length: most }, (_, k) => k).filter((k) => only === undefined || only.has(k)) : [];
    return [this.keys.tag, ...partitions.map((k) => partitionTag(this.prefix, k))];
  }
}

/** A power of two from 1 to MAX_PARTITIONS: such counts space the partitions' slots evenly. */
export function isPartitionCount(count: number): boolean {
  return Number.isInteger(count) && count >= 1 && count <= MAX_PARTITIONS && (count & (count - 1)) === 0;
}

/** A count read from the map; anything else (another process wrote the key) is refused, naming the key. */
function storedCount(key: string, value: string): number {
  const count = Number(value);
  if (!isPartitionCount(count)) {
    throw new ConfigError(
      `the partition map ${key} holds ${JSON.stringify(value.slice(0, 40))}, not a partition count (a power of two from 1 to ${MAX_PARTITIONS}); workers write it from ARCFLOW_PARTITIONS`,
    );
  }
  return count;
}
