import { ARCHIVE_FORMAT, encodeArchive } from '../records/archive.ts';
import { readRoundCalls } from '../records/round-calls.ts';
import { JobId, QueueName } from '../redis/keys.ts';
import type { StoreContext } from '../store-context.ts';

/**
 * Ended runs' compaction into their record and one archive (see `records/archive.ts`), made once,
 * after the run's end, by the process whose write ended it, or by the sweep when that process died
 * first (`compaction-sweep.ts`). The run's finished BullMQ jobs go in the same step.
 */
export class RunCompaction {
  constructor(
    private readonly context: StoreContext,
    private readonly partitions: { tags(): Promise<string[]> },
  ) {}

  /** Ended runs not compacted yet that ended more than `ageMs` ago (by the Redis server's clock), in every partition. */
  async uncompacted(ageMs: number, limit: number): Promise<string[]> {
    const { redis, keys } = this.context;
    const [seconds, micros] = await redis.time();
    const before = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - ageMs;
    const found = await Promise.all((await this.partitions.tags()).map((tag) => redis.zrangebyscore(keys.uncompactedRunsIn(tag), '-inf', before, 'LIMIT', 0, limit)));
    return found.flat().slice(0, limit);
  }

  /** Takes a run that needs no compaction (compacted already, or gone) out of its partition's uncompacted set. */
  async forget(run_id: string): Promise<void> {
    await this.context.redis.zrem(this.context.keys.uncompactedRunsIn(this.context.keys.tagOf(run_id)), run_id);
  }

  /**
   * Compacts an ended run (dumpRun, then compactRun, which writes only if nothing changed between
   * the two): true when this call compacted it. A process that dies between the two leaves the run
   * as it was, whole and readable (its keys expire together, as before), for the sweep.
   */
  async compact(run_id: string): Promise<boolean> {
    return (await this.compaction(run_id)) === 'compacted';
  }

  /**
   * What compacting a run did: `compacted` now; `nothing` to do (the run is compacted already, gone,
   * or not ended); `changed` between its read and its write (nothing written: try again).
   */
  async compaction(run_id: string): Promise<CompactionOutcome> {
    const { keys, scripts } = this.context;
    const record = keys.record(run_id);
    const [dumpedNow, size = 0, flat = [], agent = '', workflow = ''] = (await scripts.dumpRun([record], [])) as [number, number?, unknown[]?, string?, string?];
    if (dumpedNow !== 1) return 'nothing';
    // A workflow's provider jobs are in its steps' agents' queues: only an agent run's are named here.
    const jobs = runJobs(keys.tagOf(run_id), run_id, workflow ? undefined : agent, flat);
    const done = await scripts.compactRun([record], [encodeArchive(flat) as unknown as string, ARCHIVE_FORMAT, size, ...jobs]);
    return done === 1 ? 'compacted' : 'changed';
  }
}

/** See {@link RunCompaction.compaction}. */
export type CompactionOutcome = 'compacted' | 'nothing' | 'changed';

const RESPONSE_KEY = /^:(.+):response:(\d+)$/;
const ROUND_CALLS_FIELD = /^(.+)\|(\d+)\|calls$/;

/**
 * An agent run's BullMQ jobs in its own slot, as queue key and id pairs: a provider job per recorded
 * response (given the agent, whose queue they are in), and a tool job per fanned-out call of each
 * round. Read from the run's dumped keys (flat suffix, type, value triples).
 */
export function runJobs(tag: string, run_id: string, agent: string | undefined, flat: readonly unknown[]): string[] {
  const jobs: string[] = [];
  for (let at = 0; at < flat.length; at += 3) {
    const [suffix, kind, value] = [flat[at] as string, flat[at + 1], flat[at + 2]];
    const response = RESPONSE_KEY.exec(suffix);
    if (response && kind === 'string' && agent) jobs.push(`${tag}:${QueueName.agent(agent)}`, JobId.provider(run_id, response[1]!, Number(response[2])));
    if (suffix === ':pending' && kind === 'hash') {
      const fields = value as string[];
      for (let field = 0; field + 1 < fields.length; field += 2) {
        const round = ROUND_CALLS_FIELD.exec(fields[field]!);
        if (!round) continue;
        // Calls another process overwrote name no job: their jobs are left to BullMQ's own retention.
        for (const [tool_call_id, tool_name, definition_hash] of readRoundCalls(fields[field + 1]!) ?? []) {
          if (definition_hash) jobs.push(`${tag}:${QueueName.tool(tool_name, definition_hash)}`, JobId.tool(run_id, round[1]!, Number(round[2]), tool_call_id));
        }
      }
    }
  }
  return jobs;
}

/** What a log line says of a failed compaction: the error's code and message, none of the run's content. */
export function failureFields(error: unknown): { code?: string; message: string } {
  const code = (error as { code?: unknown } | undefined)?.code;
  return { ...(typeof code === 'string' ? { code } : {}), message: error instanceof Error ? error.message : String(error) };
}
