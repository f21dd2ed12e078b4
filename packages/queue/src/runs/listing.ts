import type { RunRecord, RunStatus } from '@arcflow/core';
import type { PartitionMap } from '../redis/partition-map.ts';
import type { StoreContext } from '../store-context.ts';
import { StoredFormatError } from '../records/formats.ts';

/** What to list (see {@link RunListing.listRuns}). */
export interface RunListQuery {
  readonly status?: RunStatus;
  readonly agent?: string;
  readonly tenant?: string;
  readonly limit: number;
  readonly cursor?: string;
}

/** Runs listed newest first from the listing indexes of every partition, and the indexes trimmed as retention removes records. */
export class RunListing {
  constructor(
    private readonly context: StoreContext,
    private readonly partitions: PartitionMap,
    private readonly records: { getRun(run_id: string): Promise<RunRecord | undefined> },
  ) {}

  /**
   * Runs newest first (by creation time, then id), from the listing index: every run, or one
   * agent's; with `status`, only those in it, and with `tenant`, only that tenant's. `cursor` continues a listing after the run it names.
   * Index entries whose record retention has removed are dropped as they are met.
   */
  async listRuns(query: RunListQuery): Promise<{ runs: RunRecord[]; next_cursor?: string }> {
    // Every partition's index, merged: the listing reads as one.
    const indexes = (await this.tags()).map((tag) => this.context.keys.runsIndexIn(tag, query.agent));
    await Promise.all(indexes.map((index) => this.trimRunIndex(index)));
    let after = query.cursor;
    let exhausted = false;
    const runs: RunRecord[] = [];
    // Reads a page more than asked for at a time, so a status filter rarely needs a second read.
    for (let reads = 0; runs.length < query.limit && reads < 20; reads += 1) {
      const count = Math.max(query.limit * 2, 50);
      const pages = await Promise.all(indexes.map(async (index) => (await this.indexPage(index, after, count)).map((entry) => ({ ...entry, index }))));
      const merged = pages.flat().sort((a, b) => b.score - a.score || (a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0));
      const page = merged.slice(0, count);
      if (page.length === 0) return { runs };
      // Every index gave fewer entries than asked for, and the page holds them all: none holds more after it.
      exhausted = merged.length <= count && pages.every((entries) => entries.length < count);
      const records = await Promise.all(page.map(({ run_id }) => this.records.getRun(run_id).catch(unlessUnreadable)));
      for (const [position, entry] of page.entries()) {
        const record = records[position];
        after = `${entry.score}:${entry.run_id}`;
        // A record another process overwrote is left out, not the page.
        if (record === UNREADABLE) continue;
        if (!record) {
          await this.context.redis.zrem(entry.index, entry.run_id);
          continue;
        }
        if (query.status !== undefined && record.status !== query.status) continue;
        // A run enqueued with no tenant is the `default` tenant's (SPEC §14).
        if (query.tenant !== undefined && (record.tenant ?? 'default') !== query.tenant) continue;
        runs.push(record);
        // A cursor only when more may follow (SPEC §5: `next_cursor?`).
        if (runs.length === query.limit) return position < page.length - 1 || !exhausted ? { runs, next_cursor: after } : { runs };
      }
    }
    // The reads ran out before the index did: a cursor, even on a page with no match, so a caller
    // that follows cursors (a bulk action) goes on to the matches further down.
    return after === undefined || exhausted ? { runs } : { runs, next_cursor: after };
  }

  /**
   * Drops listing-index entries of runs created longer ago than the retention period and a day
   * (their records have expired, or will have once they end): the global index and each agent's.
   */
  async trimRunIndexes(agents: readonly string[]): Promise<void> {
    const { keys } = this.context;
    const indexes = (await this.tags()).flatMap((tag) => [keys.runsIndexIn(tag), ...agents.map((agent) => keys.runsIndexIn(tag, agent))]);
    await Promise.all(indexes.map((index) => this.trimRunIndex(index)));
  }

  /** Every tag a run may live under (the prefix's own, and each partition's). */
  async tags(): Promise<string[]> {
    return this.partitions.tagsOf(await this.partitions.read());
  }

  private trimRunIndex(index: string): Promise<number> {
    return this.context.redis.zremrangebyscore(index, '-inf', Date.now() - this.context.retentionSeconds * 1000 - 86_400_000);
  }

  /** Index entries after `cursor` (`<created_at>:<run_id>`), newest first. */
  private async indexPage(index: string, cursor: string | undefined, count: number): Promise<{ run_id: string; score: number }[]> {
    const [score, member] = cursor === undefined ? ['+inf', undefined] : [cursor.slice(0, cursor.indexOf(':')), cursor.slice(cursor.indexOf(':') + 1)];
    // Entries with the cursor's own score come back too; those at or before the cursor are skipped.
    const { redis } = this.context;
    const batch = count + 64;
    const after = (flat: readonly string[]) => pairs(flat).filter((entry) => member === undefined || String(entry.score) !== score || entry.run_id < member);
    const first = await redis.zrevrangebyscore(index, score, '-inf', 'WITHSCORES', 'LIMIT', 0, batch);
    const entries = after(first);
    if (entries.length >= count || first.length < batch * 2 || member === undefined) return entries.slice(0, count);
    // More runs of the cursor's millisecond than one read holds: on from the cursor's own place in
    // this index, or, when the cursor is another index's run, read past them batch by batch.
    const rank = await redis.zrevrank(index, member);
    if (rank !== null) return pairs(await redis.zrevrange(index, rank + 1, rank + count, 'WITHSCORES'));
    for (let offset = batch; entries.length < count; offset += batch) {
      const flat = await redis.zrevrangebyscore(index, score, '-inf', 'WITHSCORES', 'LIMIT', offset, batch);
      entries.push(...after(flat));
      if (flat.length < batch * 2) break;
    }
    return entries.slice(0, count);
  }
}

/** A `WITHSCORES` reply as entries. */
function pairs(flat: readonly string[]): { run_id: string; score: number }[] {
  const entries: { run_id: string; score: number }[] = [];
  for (let at = 0; at + 1 < flat.length; at += 2) entries.push({ run_id: flat[at]!, score: Number(flat[at + 1]) });
  return entries;
}

const UNREADABLE = Symbol('unreadable');

/** A record that cannot be read, as the listing takes it: left out. Any other failure fails the listing. */
function unlessUnreadable(error: unknown): typeof UNREADABLE {
  if (error instanceof StoredFormatError) return UNREADABLE;
  throw error;
}
