import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { closeRedis, outageOf, redactUrl } from '../redis/connection.ts';
import type { Registry } from '../records/registry.ts';
import type { CancellationListener } from '../runs/cancel.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { Watchdog } from '../watchdog/watchdog.ts';
import type { DeadWorkers } from '../watchdog/dead-workers.ts';

/** How long a drain waits for Redis to come back before it stops without finishing. */
const DRAIN_WITHOUT_REDIS_MS = 10_000;

/** What a worker stops when it drains. */
export interface Draining {
  readonly id: string;
  readonly redis: string;
  readonly connection: Redis;
  readonly heartbeat: NodeJS.Timeout;
  readonly watchdog: Watchdog;
  readonly deadWorkers: DeadWorkers;
  readonly registry: Registry;
  readonly registrations: ReadonlyMap<string, unknown>;
  readonly heldTools: ReadonlyMap<string, string>;
  readonly workers: readonly Worker[];
  readonly queues: Dispatcher;
  readonly cancellation: CancellationListener;
}

/**
 * The worker's `close`, the same drain however often it is called: stops taking jobs, lets
 * in-flight jobs finish, then disconnects. Without Redis a drain cannot finish (every job's
 * completion is a write): after a while it stops, and rejects.
 */
export function drainOnce(parts: Draining): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= drain(parts);
    return closing;
  };
}

async function drain(parts: Draining): Promise<void> {
  const { id, connection, registry, workers, queues } = parts;
  clearInterval(parts.heartbeat);
  const drained = (async () => {
    await parts.watchdog.close();
    await parts.deadWorkers.close();
    await registry.withdraw(id, parts.registrations.keys(), parts.heldTools).catch(() => undefined);
    await Promise.all(workers.map((worker) => worker.close()));
    await queues.close();
  })();
  const outage = outageOf(connection, DRAIN_WITHOUT_REDIS_MS);
  try {
    const away = await Promise.race([drained.then(() => false), outage.away.then(() => true)]);
    if (away) {
      drained.catch(() => undefined);
      throw new Error(
        `Redis at ${redactUrl(parts.redis)} has been unreachable for ${DRAIN_WITHOUT_REDIS_MS / 1000} s: stopped without draining; the jobs in flight go to other workers once their locks expire`,
      );
    }
  } finally {
    outage.stop();
    await parts.cancellation.close();
    await closeRedis(connection);
  }
}
