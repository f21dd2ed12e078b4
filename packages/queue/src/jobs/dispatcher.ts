import { type ToolDefinition, toolDefinitionHash } from '@arcflow/core';
import { type Job, type JobsOptions, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { JobId, type Keys, QueueName } from '../redis/keys.ts';
import { FairClock } from '../tenancy/fair-clock.ts';
import { TenantLimits } from '../tenancy/limits.ts';
import { TenantSettings } from '../tenancy/settings.ts';
import { CostLedger } from '../cost/cost-ledger.ts';
import { PROVIDER_JOB, type JoinTarget, type ProviderJobData, type ToolJobData, providerJobOptions, WAIT_TIMEOUT_JOB, type WaitTimeoutData, toolJobOptions } from './jobs.ts';

/**
 * The one door to BullMQ: every job a process adds, promotes or removes goes through here, and the
 * queues it reads are opened here, once each and shared. A queue lives under a hash tag (BullMQ's
 * prefix): a run's jobs under its partition's (`forRun`), what is global under the prefix's own
 * (`get`). Job ids are deterministic (`JobId`), so any process may add a job again: BullMQ adds it
 * once. Each method issues its commands as soon as it is called, so the adds a caller starts in one
 * tick go out in one socket write. A job a worker holds is delayed by the worker itself
 * (`Job.moveToDelayed` needs the worker's lock token): that is not an add.
 *
 * Every provider and tool job is added with a BullMQ priority from its run's tenant's virtual time
 * (`FairClock`, SPEC §14): BullMQ then takes the tenants' jobs in turn, weighted, and a run's
 * priority orders its tenant's jobs.
 */
export class Dispatcher {
  private readonly queues = new Map<string, Queue>();
  /** The tenant settings the workers published (weights). */
  readonly tenants: TenantSettings;
  /** Each queue's fair clock. */
  readonly fair: FairClock;
  /** The tenants' limits (SPEC §14). */
  readonly limits: TenantLimits;
  /** The cost of calls, held and settled against the runs' and tenants' budgets (SPEC §14). */
  readonly cost: CostLedger;

  constructor(
    private readonly connection: Redis,
    readonly keys: Keys,
  ) {
    FairClock.define(connection);
    this.tenants = new TenantSettings(connection, keys.tenancy);
    this.fair = new FairClock(connection, this.tenants, keys.record);
    this.limits = new TenantLimits(connection, keys, this.tenants, this.fair);
    this.cost = new CostLedger(connection, keys, this.tenants, this.fair);
  }

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

  /** The queues a job of a run's call to this tool definition may be in: its partition's, and the prefix's (a capped tool's). */
  toolQueues(call: ToolQueueOf, run_id: string): Queue[] {
    if (!call.definition_hash) return [];
    const name = QueueName.tool(call.tool_name, call.definition_hash);
    return [this.forRun(name, run_id), this.get(name)];
  }

  /** A step's first provider job: a new run's (or each root step's), a workflow step's, a child run's, a thread's next run's. */
  startStep(target: JoinTarget, data: ProviderJobData): Promise<void> {
    return this.addProviderJob(target, data);
  }

  /**
   * A round's join: provider job `n+1` in the run's partition. Every process that sees the round
   * settled (a tool job, a re-delivery of one, the provider job when nothing fanned out) may call this.
   */
  join(target: JoinTarget, data: ProviderJobData): Promise<void> {
    return this.addProviderJob(target, data);
  }

  /** The watchdog's repair: the provider job a quiet step needs, added again (its finished job of that id removed first). */
  async readd(target: JoinTarget, data: ProviderJobData): Promise<void> {
    await this.removeFinished(this.forRun(target.queue, data.run_id), JobId.provider(data.run_id, data.step_id, data.iteration));
    await this.addProviderJob(target, data);
  }

  /**
   * A tool job of a call: in the tool definition's queue (see `QueueName.tool`), in the run's
   * partition, except for a tool with a `concurrency` cap, whose jobs all go to one queue under the
   * prefix's tag so the cap holds across every partition. A round's fan-out calls this once per
   * call in one tick: cheaper than `addBulk`'s MULTI, and atomicity is not needed, since a
   * re-delivered provider job re-adds only what is missing.
   */
  async addToolJob(tool: ToolDefinition, data: ToolJobData, backoffMs: number): Promise<Job> {
    const queue = this.toolQueue(tool.name, toolDefinitionHash(tool), tool.concurrency !== undefined, data.run_id);
    const options = toolJobOptions(data, tool, backoffMs);
    return queue.add(tool.name, data, { ...options, priority: await this.fair.priority(queue, data.run_id, options.jobId) });
  }

  /** The tool job of a call that waited, as stored with its approval request (its options included). */
  async addApprovedToolJob(request: {
    readonly tool_name: string;
    readonly tool_job: ToolJobData;
    readonly tool_job_options: JobsOptions;
    readonly tool_capped?: boolean;
  }): Promise<Job> {
    const queue = this.toolQueue(request.tool_name, request.tool_job.definition_hash, request.tool_capped === true, request.tool_job.run_id);
    // Its place among the tenants is taken now, when it can run, not when it began to wait.
    const job_id = request.tool_job_options.jobId ?? JobId.tool(request.tool_job.run_id, request.tool_job.step_id, request.tool_job.iteration, request.tool_job.tool_call_id);
    return queue.add(request.tool_name, request.tool_job, { ...request.tool_job_options, priority: await this.fair.priority(queue, request.tool_job.run_id, job_id) });
  }

  /** A waiting call's timeout: a delayed job on the run's provider queue, of a deterministic id, due in `delay` ms. */
  async addTimeout(queue: string, data: WaitTimeoutData, jobId: string, delay: number): Promise<void> {
    await this.forRun(queue, data.run_id).add(WAIT_TIMEOUT_JOB, data, { jobId, delay });
  }

  /** Runs a delayed job now. */
  promote(job: Job): Promise<void> {
    return job.promote();
  }

  /** Whether a job finished (completed or failed): removed, its id can be used again. */
  async finished(job: Job): Promise<boolean> {
    return (await job.isCompleted()) || (await job.isFailed());
  }

  /** Removes a job (it must not be held by a worker). */
  remove(job: Job): Promise<void> {
    return job.remove();
  }

  /** Removes job `id` of `queue` if it finished (completed or failed), so a job with its id can be added again. */
  async removeFinished(queue: Queue, id: string): Promise<void> {
    const job: Job | undefined = await queue.getJob(id);
    if (job && (await this.finished(job))) await this.remove(job);
  }

  /** Removes a job of a run's call from its tool's queue, wherever the tool's cap put it. */
  async removeToolJob(call: ToolQueueOf, run_id: string, job_id: string): Promise<void> {
    await Promise.all(this.toolQueues(call, run_id).map((queue) => queue.remove(job_id)));
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((queue) => queue.close()));
  }

  private async addProviderJob(target: JoinTarget, data: ProviderJobData): Promise<void> {
    const queue = this.forRun(target.queue, data.run_id);
    const options = providerJobOptions(data, target.attempts);
    await queue.add(PROVIDER_JOB, data, { ...options, priority: await this.fair.priority(queue, data.run_id, options.jobId) });
  }

  private toolQueue(tool_name: string, definition_hash: string, capped: boolean, run_id: string): Queue {
    const name = QueueName.tool(tool_name, definition_hash);
    return capped ? this.get(name) : this.forRun(name, run_id);
  }
}

/** What names a call's tool queue: the tool's name and the definition hash it was planned with (absent: the call was never fanned out). */
export interface ToolQueueOf {
  readonly tool_name: string;
  readonly definition_hash?: string | undefined;
}

/** What work on a run's calls needs of the dispatcher: removing a closed call's job, and adding a round's join. */
export type CallQueues = Pick<Dispatcher, 'removeToolJob' | 'join'>;
