import type { ApprovalAnswer, ApprovalResolution, RunRecord, StreamChunk, ToolResultAnswer, ToolResultInput, TraceEvent } from '@arcflow/core';
import type { ClientJobs } from './enqueue.ts';
import type { EnqueueRequest } from './enqueue-request.ts';
import type { CallQueues } from '../jobs/dispatcher.ts';
import { closeRedis } from '../redis/connection.ts';
import { cancelRequested } from '../runs/cancel.ts';
import { type ListQuery, checkListQuery } from '../runs/list-query.ts';
import type { StreamOptions } from '../streams/follow.ts';
import { type ClientOptions, type OpenedClient, openClient } from './context.ts';
import { checkApproval, checkEnqueueRequest, checkForkRequest, checkRunId, checkToolResult } from './checks.ts';
import { type BulkOutcome, type BulkRequest, bulkAction, checkBulkRequest } from '../runs/bulk.ts';
import type { ForkRequest } from '../runs/fork.ts';
import { type AgentInfo, type QueueInfo, agentInfos } from './queue-infos.ts';
import { type RunMessages, type ThreadHandle, runEvents, runMessages, runStream, threadHandle } from './read.ts';
import { RunWaiter } from './wait.ts';
import { type TenantStanding, tenantStanding } from './tenant-standing.ts';

export type { ListQuery } from '../runs/list-query.ts';
export type { ForkRequest } from '../runs/fork.ts';
export type { BulkOutcome, BulkRequest } from '../runs/bulk.ts';
export type { EnqueueRequest } from './enqueue-request.ts';
export type { StreamOptions } from '../streams/follow.ts';
export { CLIENT_DEFAULTS, type ClientOptions } from './context.ts';
export type { AgentInfo, QueueInfo } from './queue-infos.ts';
export type { RunMessages, ThreadHandle } from './read.ts';
export type { TenantStanding } from './tenant-standing.ts';

export interface ArcflowClient {
  enqueue(request: EnqueueRequest): Promise<{ run_id: string; created: boolean }>;
  get(run_id: string): Promise<RunRecord | undefined>;
  /** The agents registered under the prefix: their tools and how many live workers serve them now. */
  agents(): Promise<AgentInfo[]>;
  /** Every queue of the registered agents, workflows and tools: its depth and live workers. */
  queues(): Promise<QueueInfo[]>;
  /** Runs newest first, by status and agent; `next_cursor` continues the listing. */
  list(query?: ListQuery): Promise<{ runs: RunRecord[]; next_cursor?: string }>;
  /** Resolves when the run ends, or at the timeout with the run as it stands. */
  wait(run_id: string, options?: { timeout_ms?: number }): Promise<RunRecord>;
  /** The run's events in order; with `follow`, keeps reading until the run ends. */
  events(run_id: string, options?: { follow?: boolean; poll_ms?: number }): AsyncIterable<TraceEvent>;
  cancel(run_id: string): Promise<{ cancelled: boolean; status: RunRecord['status'] }>;
  /**
   * The run's stream (SPEC §12): its chunks after `after` (default 0), following the run until
   * its `end` chunk. Each reader holds a Redis connection of its own while it reads; stopping
   * (`break`, `return`) closes it and never affects the run.
   */
  stream(run_id: string, options?: StreamOptions): AsyncIterableIterator<StreamChunk>;
  /**
   * Answers a call waiting for approval (SPEC §10): approved, it runs; rejected, the model gets
   * the rejection (with `reason`). Returns the call's resolution; asking again returns the same
   * one. A call that is not waiting (never was, or its run has ended) is a `not_pending` error.
   */
  approve(run_id: string, tool_call_id: string, answer: ApprovalAnswer): Promise<ApprovalResolution>;
  /**
   * Answers a call waiting for its result from outside (SPEC §20): `{ output }` completes it,
   * `{ error }` fails it. Returns `{ status, answered_at }`; answering again returns the first
   * answer. A call that does not wait for a result is `not_waiting`; an output the tool's
   * `output_schema` refuses is `invalid_request` (nothing is recorded; the call goes on waiting).
   */
  submitToolResult(run_id: string, tool_call_id: string, answer: ToolResultInput): Promise<ToolResultAnswer>;
  /** The run's conversation so far, step by step (what its tools received and returned); `unknown_run` for a run not kept. */
  messages(run_id: string): Promise<RunMessages>;
  /** A thread (SPEC §11): its messages, its runs in enqueue order, and deleting it (its runs stay). */
  thread(thread_id: string): ThreadHandle;
  /**
   * A new run that replays `run_id`'s recorded rounds before `from.iteration` (no model call, no
   * tool execution) and runs live from there (SPEC §15); a fork of a thread run runs on a new
   * thread, a branch of the source's, named in `thread_id`.
   */
  fork(run_id: string, request: ForkRequest): Promise<{ run_id: string; thread_id?: string }>;
  /** A fork from the iteration a failed or cancelled run stopped at; a run is retried once (again: its retry's id). */
  retry(run_id: string): Promise<{ run_id: string; thread_id?: string }>;
  /** Retries or cancels every run a filter matches (SPEC §15); safe to repeat, and `dry_run` changes nothing. */
  bulk(request: BulkRequest): Promise<BulkOutcome>;
  /** Where a tenant stands (SPEC §14): its active and queued runs, and what its calls cost today (UTC). */
  tenant(tenant: string): Promise<TenantStanding>;
  close(): Promise<void>;
}

/** The client for backend services: enqueue runs, read them, wait for them, cancel them. */
export function createClient(options: ClientOptions = {}): ArcflowClient {
  const context = openClient(options);
  const waiter = new RunWaiter(context);
  const jobs = lazyJobs(context);
  return {
    ...runReading(context, waiter),
    ...runOperating(context, jobs.get),
    async close() {
      // Queues opened by an earlier call (one still importing is waited for); a failed import opened none.
      await jobs.close();
      await waiter.close();
      await closeRedis(context.redis);
    },
  };
}

type Context = OpenedClient;
type Jobs = () => Promise<ClientJobs>;

/**
 * The queue operations (enqueue, queue depths, approvals, removing a cancelled call's job), with
 * BullMQ behind them: imported on the first call that needs them, so reading runs never loads it.
 */
function lazyJobs(context: Context): { readonly get: Jobs; close(): Promise<void> } {
  let loadedJobs: Promise<ClientJobs> | undefined;
  const get = (): Promise<ClientJobs> =>
    (loadedJobs ??= import('./enqueue.ts').then(
      ({ ClientJobs }) => new ClientJobs(context),
      (error: unknown) => {
        loadedJobs = undefined; // a failed import is tried again by the next call
        throw error;
      },
    ));
  return {
    get,
    close: async () => {
      if (loadedJobs) await (await loadedJobs.catch(() => undefined))?.close();
    },
  };
}

/** What reads runs, threads and agents: none loads BullMQ. */
function runReading(context: Context, waiter: RunWaiter): Pick<ArcflowClient, 'agents' | 'list' | 'get' | 'wait' | 'events' | 'stream' | 'messages' | 'thread'> {
  const { store, reach } = context;
  return {
    agents: () => agentInfos(context),
    list: async (query) => {
      const checked = checkListQuery(query);
      return reach(() => store.listRuns(checked));
    },
    get: async (run_id) => {
      checkRunId(run_id);
      return reach(() => store.getRun(run_id));
    },
    wait: async (run_id, waitOptions = {}) => waiter.wait(checkRunId(run_id), waitOptions),
    events: (run_id, eventOptions = {}) => runEvents(context, checkRunId(run_id), eventOptions),
    stream: (run_id, streamOptions = {}) => runStream(context, checkRunId(run_id), streamOptions),
    messages: async (run_id) => runMessages(context, checkRunId(run_id)),
    thread: (thread_id) => threadHandle(context, thread_id),
  };
}

/** What a cancel needs: the store, and the queues its closed calls' jobs are removed from (BullMQ loads only when there are some). */
function cancelling(context: Context, jobs: Jobs) {
  const toolJobs: CallQueues = {
    removeToolJob: async (call, run_id, job_id) => (await jobs()).removeToolJob(call, run_id, job_id),
    join: async (target, data) => (await jobs()).join(target, data),
  };
  return {
    ...context,
    queues: toolJobs,
    workflowGraph: async (workflow: string) => (await context.lookup(workflow))?.workflow,
    isThreadRun: (run_id: string) => context.threads.isThreadRun(run_id),
    startNextOnThread: async (run_id: string) => (await jobs()).startNextOnThread(run_id),
  };
}

/** What changes runs: enqueue, cancel, answers to waiting calls, fork, retry and bulk actions; and the queues' depths. */
function runOperating(context: Context, jobs: Jobs): Omit<ArcflowClient, keyof ReturnType<typeof runReading> | 'close'> {
  const { store, reach } = context;
  const cancelDeps = cancelling(context, jobs);
  return {
    enqueue: async (request) => {
      checkEnqueueRequest(request);
      return (await jobs()).enqueue(request);
    },
    queues: async () => (await jobs()).queueInfos(),
    cancel: async (run_id) => {
      checkRunId(run_id);
      return reach(() => cancelRequested(cancelDeps, run_id));
    },
    approve: async (run_id, tool_call_id, answer) => {
      checkApproval(run_id, tool_call_id, answer);
      return (await jobs()).approve(run_id, tool_call_id, answer);
    },
    submitToolResult: async (run_id, tool_call_id, answer) => {
      checkToolResult(run_id, tool_call_id, answer);
      return (await jobs()).submitToolResult(run_id, tool_call_id, answer);
    },
    fork: async (run_id, request) => {
      checkForkRequest(run_id, request);
      const { created: _, ...forked } = await (await jobs()).fork(run_id, request);
      return forked;
    },
    retry: async (run_id) => {
      checkRunId(run_id);
      const { created: _, ...retried } = await (await jobs()).retry(run_id);
      return retried;
    },
    bulk: async (request) => {
      checkBulkRequest(request);
      return bulkAction(
        {
          list: (query) => reach(() => store.listRuns(query)),
          retry: async (run_id) => (await (await jobs()).retry(run_id)).created,
          cancel: async (run_id) => (await reach(() => cancelRequested(cancelDeps, run_id))).cancelled,
        },
        request,
      );
    },
    tenant: async (tenant) => reach(() => tenantStanding(context, tenant)),
  };
}
