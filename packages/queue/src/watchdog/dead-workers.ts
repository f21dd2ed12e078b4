import { readFileSync } from 'node:fs';
import type { ToolLogger } from '@arcflow/core';
import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * How often a worker looks for worker processes that died (SIGKILL, OOM): a dead process's
 * connections close at once, so its jobs go back to wait within about two of these (a process
 * must be missing from two readings in a row, so that a reconnect is not taken for a death).
 */
export const DEAD_WORKER_CHECK_MS = 250;

/**
 * After this process's own connection comes back (Redis restarted, or the network between), or
 * while Redis has been up for less than this, the others reconnect at their own pace (ioredis
 * backs off up to 2 s, and a busy process takes longer): no one is taken for dead until this has
 * passed and each has been seen again.
 */
export const RECONNECT_GRACE_MS = 5_000;

/**
 * At a start (or after a reconnect), how soon a reading follows one that did not count yet (this
 * process's connections not up) and the first one that counted: the workers that died before this
 * one started are confirmed, and their jobs released, about this long after its connections are up
 * instead of two full check intervals.
 */
export const START_READING_MS = 60;

/**
 * Makes a BullMQ Worker's connection and lock tokens name the arcflow worker that runs it: its
 * blocking connection is named `<tag>:<queue>:w:<owner>` (BullMQ's worker name), and each lock it
 * takes holds `<owner>/<index>:<n>` (BullMQ's token is `<Worker.id>:<n>`). Called in the tick the
 * Worker is constructed: it takes its first job only after an await.
 */
export function ownLocks(worker: Worker, owner: string, index: number): void {
  (worker as { id: string }).id = `${owner}/${index}`;
}

/** The arcflow workers with a connection open, read from `CLIENT LIST` replies (one per node). */
export function liveOwners(clientLists: readonly string[]): Set<string> {
  const owners = new Set<string>();
  for (const list of clientLists) {
    for (const match of list.matchAll(/ name=\S*?:w:(\S+)/g)) owners.add(match[1]!);
  }
  return owners;
}

let releaseScript: string | undefined;
const releaseLua = () => {
  releaseScript ??= readFileSync(new URL('./releaseDeadLocks.lua', import.meta.url), 'utf8');
  return releaseScript;
};

export interface DeadWorkersDeps {
  readonly redis: Redis;
  /** This worker's id: a node whose client list lacks it has dropped this process's connections too, and is not read. */
  readonly owner: string;
  /** The BullMQ Workers this process runs (every queue in every partition it serves). */
  readonly workers: () => readonly Worker[];
  readonly logger: ToolLogger;
  readonly interval_ms?: number;
}

/**
 * Finds the worker processes that died holding jobs of the queues this process serves, and moves
 * those jobs back to wait at once: their locks are released and BullMQ's stall check runs on the
 * queue, with the queue's own stall limit, as it would once the locks had expired (a job stalled
 * too often fails; a tool call's loss budget counts its losses as before, see tool-losses.ts).
 *
 * A process is alive while any of its connections is open (`CLIENT LIST`, on every master of a
 * cluster). It is taken for dead once two readings in a row miss it; a worker that starts releases,
 * after its second reading, the locks of processes that died before it started. A process that is
 * frozen, or whose host vanished without closing its connections, keeps them open: its jobs come
 * back when their locks expire, as before. Where `CLIENT LIST` is refused (an ACL without
 * `@admin`), lock expiry is the only way back, and a warning says so once. When this process's own
 * connection drops, or Redis (any master) has been up for less than `RECONNECT_GRACE_MS`, it takes
 * no one for dead until the others have had time to reconnect and have been seen again.
 */
export class DeadWorkers {
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private readings = 0;
  /** Readings made sooner than the interval since the last start or reconnect (see `soon`). */
  private early = 0;
  /** Owners seen alive, and how many readings in a row have missed each since. */
  private readonly seen = new Map<string, number>();
  private refused = false;
  private quietUntil = 0;
  /** The nodes (host:port) this process's own connections have been seen on. */
  private readonly ownNodes = new Set<string>();
  private readonly onReconnect = () => {
    this.quietUntil = Date.now() + RECONNECT_GRACE_MS;
    this.seen.clear();
    // Then as at a start: the second reading releases the locks of workers that died meanwhile.
    this.readings = 0;
    this.early = 0;
  };

  constructor(private readonly deps: DeadWorkersDeps) {}

  start(): void {
    this.deps.redis.on('reconnecting', this.onReconnect);
    this.check();
    this.timer = setInterval(() => this.check(), this.deps.interval_ms ?? DEAD_WORKER_CHECK_MS);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.deps.redis.off('reconnecting', this.onReconnect);
    clearInterval(this.timer);
    this.timer = undefined;
    await this.checking;
  }

  private check(): void {
    if (this.checking || this.refused || Date.now() < this.quietUntil) return;
    this.checking = this.sweep()
      .catch((error: unknown) => {
        if (/NOPERM|unknown command/i.test(String((error as Error)?.message))) {
          this.refused = true;
          this.deps.logger.warn("CLIENT LIST is refused: a dead worker's jobs come back only when their locks expire", { error });
        }
      })
      .finally(() => {
        this.checking = undefined;
      });
  }

  /** One reading; the locks of dead owners are released when one is newly confirmed dead, or at this worker's second reading. */
  private async sweep(): Promise<void> {
    const nodes = await this.clientLists();
    // Until this process's own connections are up, a reading counts for nothing. A node that has lost
    // them since (restarted, or cut off) has lost the others' too: they reconnect at their own pace.
    let mine = 0;
    for (const { node, list } of nodes) {
      if (liveOwners([list]).has(this.deps.owner)) {
        this.ownNodes.add(node);
        mine += 1;
      } else if (this.ownNodes.has(node)) {
        return this.onReconnect();
      }
    }
    if (mine === 0) return this.soon();
    // A Redis that has just started has every worker reconnecting at its own pace, not only this one:
    // a worker starting then (or one whose own connection came back first) waits the grace out too.
    if (this.readings === 0) {
      const young = RECONNECT_GRACE_MS - (await this.upFor());
      if (young > 0) {
        this.quietUntil = Date.now() + young;
        return;
      }
    }
    const live = liveOwners(nodes.map(({ list }) => list));
    this.readings += 1;
    if (this.readings === 1) this.soon();
    let due = this.readings === 2;
    // Owners missed once may be reconnecting: their locks are kept until a second reading misses them.
    const spared = new Set(live);
    for (const [owner, missed] of this.seen) {
      if (live.has(owner)) continue;
      if (missed === 0) {
        this.seen.set(owner, 1);
        spared.add(owner);
      } else {
        this.seen.delete(owner);
        due = true;
      }
    }
    for (const owner of live) this.seen.set(owner, 0);
    if (due) await this.release(spared);
  }

  /** The next reading shortly after this one, while starting (see START_READING_MS); at most 50 in a row (a process whose connections never show keeps the usual interval). */
  private soon(): void {
    if (this.readings > 1 || this.timer === undefined || this.early >= 50) return;
    this.early += 1;
    setTimeout(() => this.check(), START_READING_MS).unref();
  }

  /** Each node's `CLIENT LIST`: the one Redis's, or each master's of a cluster. */
  private clientLists(): Promise<{ node: string; list: string }[]> {
    return Promise.all(this.nodes().map(async (node) => ({ node: `${node.options.host}:${node.options.port}`, list: (await node.client('LIST')) as string })));
  }

  /**
   * How long the node that started last has been up, in ms, at least (`INFO server`'s whole
   * seconds); unknown (INFO refused or unreadable) counts as long enough.
   */
  private async upFor(): Promise<number> {
    const uptimes = await Promise.all(
      this.nodes().map(async (node) => {
        const info = await node.info('server').catch(() => '');
        const seconds = /^uptime_in_seconds:(\d+)/m.exec(info)?.[1];
        return seconds === undefined ? Number.POSITIVE_INFINITY : Number(seconds) * 1000;
      }),
    );
    return Math.min(...uptimes);
  }

  /** The one Redis, or each master of a cluster. */
  private nodes(): Redis[] {
    const { redis } = this.deps;
    return (redis as unknown as { isCluster?: boolean }).isCluster === true ? (redis as unknown as { nodes(role: 'master'): Redis[] }).nodes('master') : [redis];
  }

  /** Releases, queue by queue, the locks of owners not in `live`, then runs the stall check where any was released. */
  private async release(live: ReadonlySet<string>): Promise<void> {
    const lua = releaseLua();
    await Promise.all(
      this.deps.workers().map(async (worker) => {
        const { keys } = worker;
        const released = Number(await this.deps.redis.eval(lua, 3, keys.active!, keys.stalled!, keys['stalled-check']!, worker.toKey(''), ...live));
        if (released === 0) return;
        const moved = await worker.backend.moveStalledJobsToWait();
        this.deps.logger.info("a dead worker's jobs are back in their queue", { queue: worker.name, jobs: moved.length });
      }),
    );
  }
}
