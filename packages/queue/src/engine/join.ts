import { type ConnectionOptions as BullConnection, Queue } from 'bullmq';
import { PROVIDER_JOB, type JoinTarget, type ProviderJobData, providerJobOptions } from './jobs.ts';

/** The queues a worker adds jobs to, opened on first use and shared by its processors. */
export class QueuePool {
  private readonly queues = new Map<string, Queue>();

  constructor(
    private readonly connection: BullConnection,
    private readonly prefix: string,
  ) {}

  get(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection, prefix: this.prefix });
      queue.on('error', () => undefined); // the worker's connection watch reports Redis going away, once
      this.queues.set(name, queue);
    }
    return queue;
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((queue) => queue.close()));
  }
}

/**
 * Enqueues provider job `n+1`. Its id is deterministic, so every process that sees the round
 * settled (a tool job, a re-delivery of one, the provider job when nothing fanned out) may call
 * this: BullMQ adds the job once.
 */
export async function enqueueJoin(queues: Pick<QueuePool, 'get'>, target: JoinTarget, data: ProviderJobData): Promise<void> {
  await queues.get(target.queue).add(PROVIDER_JOB, data, providerJobOptions(data, target.attempts));
}
