import { type ToolDefinition, toolDefinitionHash } from '@arcflow/core';
import { type ConnectionOptions as BullConnection, Queue } from 'bullmq';
import { type Keys, QueueName } from '../redis/keys.ts';
import { PROVIDER_JOB, type JoinTarget, type ProviderJobData, providerJobOptions } from '../jobs/jobs.ts';

/**
 * The queues a process adds jobs to, opened on first use and shared. A queue lives under a hash
 * tag (BullMQ's prefix): a run's jobs under its partition's (`forRun`), what is global under the
 * prefix's own (`get`).
 */
export class QueuePool {
  private readonly queues = new Map<string, Queue>();

  constructor(
    private readonly connection: BullConnection,
    readonly keys: Keys,
  ) {}

  /** Queue `name` under `tag` (the prefix's own by default). */
  get(name: string, tag: string = this.keys.tag): Queue {
    const id = `${tag}\n${name}`;
    let queue = this.queues.get(id);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection, prefix: tag });
      queue.on('error', () => undefined); // the connection's watch reports Redis going away, once
      this.queues.set(id, queue);
    }
    return queue;
  }

  /** Queue `name` in the partition of `run_id`. */
  forRun(name: string, run_id: string): Queue {
    return this.get(name, this.keys.tagOf(run_id));
  }

  /**
   * The queue of a tool's jobs for a run: its definition's (see `QueueName.tool`), in the run's
   * partition, except for a tool with a `concurrency` cap, whose jobs all go to one queue under the
   * prefix's tag so the cap holds across every partition.
   */
  forTool(tool: ToolDefinition, run_id: string): Queue {
    const name = QueueName.tool(tool.name, toolDefinitionHash(tool));
    return tool.concurrency === undefined ? this.forRun(name, run_id) : this.get(name);
  }

  /** The queues a job of a run's call to this tool definition may be in: its partition's, and the prefix's (a capped tool's). */
  toolQueues(call: ToolQueueOf, run_id: string): Queue[] {
    if (!call.definition_hash) return [];
    const name = QueueName.tool(call.tool_name, call.definition_hash);
    return [this.forRun(name, run_id), this.get(name)];
  }

  /** Enqueues a round's join (see {@link enqueueJoin}). */
  join(target: JoinTarget, data: ProviderJobData): Promise<void> {
    return enqueueJoin(this, target, data);
  }

  /** Removes a job of a run's call from its tool's queue, wherever the tool's cap put it. */
  async removeToolJob(call: ToolQueueOf, run_id: string, job_id: string): Promise<void> {
    await Promise.all(this.toolQueues(call, run_id).map((queue) => queue.remove(job_id)));
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((queue) => queue.close()));
  }
}

/** What names a call's tool queue: the tool's name and the definition hash it was planned with (absent: the call was never fanned out). */
export interface ToolQueueOf {
  readonly tool_name: string;
  readonly definition_hash?: string | undefined;
}

/** What work on a run's calls needs of its queues: removing a closed call's job, and adding a round's join. */
export type CallQueues = Pick<QueuePool, 'removeToolJob' | 'join'>;

/**
 * Enqueues provider job `n+1` in the run's partition. Its id is deterministic, so every process
 * that sees the round settled (a tool job, a re-delivery of one, the provider job when nothing
 * fanned out) may call this: BullMQ adds the job once.
 */
export async function enqueueJoin(queues: QueuePool, target: JoinTarget, data: ProviderJobData): Promise<void> {
  await queues.forRun(target.queue, data.run_id).add(PROVIDER_JOB, data, providerJobOptions(data, target.attempts));
}
