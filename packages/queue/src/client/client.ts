import {
  ConfigError,
  NamePattern,
  silentLogger,
  RequestError,
  type RunRecord,
  RUN_TERMINAL_KINDS,
  TERMINAL_STATUSES,
  type TraceEvent,
  checkExecConfig,
  checkOnBusy,
  checkRunInput,
  checkThreadId,
  type ApprovalAnswer,
  type ApprovalResolution,
  type ChatMessage,
  type StreamChunk,
  answerProblem,
  toolResultProblem,
  type ToolResultAnswer,
  type ToolResultInput,
  RUN_STEP_ID,
  sinkSteps,
  workflowOutput,
} from '@arcflow/core';
import type { Redis } from 'ioredis';
import type { ClientContext, ClientJobs, EnqueueRequest, QueueInfo } from './enqueue.ts';
import { connectRedis, duplicateRedis } from '../redis/connect.ts';
import { endRun, settleParentOf, stopClosedWork } from '../runs/end-run.ts';
import type { CallQueues } from '../loop/join.ts';
import { type ConnectionOptions, WORKER_DEFAULTS, resolveConnection } from '../config/options.ts';
import { type AgentRegistration, Registry } from '../records/registry.ts';
import { type RunEnding, RunStore } from '../runs/run-store.ts';
import { ThreadStore } from '../threads/thread-store.ts';
import { coalesceWrites } from '../redis/writes.ts';
import { closeRedis, watchConnection, withRedis } from '../redis/connection.ts';
import { clientEnv } from './env.ts';
import { unknownRun } from '../runs/unknown-run.ts';
import { checkEnqueueOptions } from './enqueue-options.ts';
import { type ListQuery, checkListQuery } from '../runs/list-query.ts';
import { type StreamOptions, checkAfter, followStream } from '../streams/follow.ts';

export type { ListQuery } from '../runs/list-query.ts';
export type { EnqueueRequest, QueueInfo } from './enqueue.ts';
export type { StreamOptions } from '../streams/follow.ts';

export interface ClientOptions extends ConnectionOptions {
  /** How long a call may wait for an unreachable Redis before it fails with `redis_unavailable` (default 5000). */
  redis_timeout_ms?: number;
}

export const CLIENT_DEFAULTS = Object.freeze({ redis_timeout_ms: 5_000 });

/** An agent as the registry knows it (SPEC §8, `GET /v1/agents`). */
export interface AgentInfo {
  readonly name: string;
  readonly kind: 'agent' | 'workflow';
  readonly tools: readonly string[];
  readonly live_workers: number;
  /** A workflow's steps: id, type and dependencies, in definition order. */
  readonly steps?: readonly { readonly id: string; readonly type: 'agent' | 'tool'; readonly depends_on: readonly string[] }[];
}

/** A run's conversation (`client.messages`): the content that events and spans never hold. */
export interface RunMessages {
  readonly run_id: string;
  /**
   * An agent run's conversation, in order: the agent's instructions (a system message), the input,
   * the assistant turns with their tool calls, the tool results (and messages steered in), then the
   * final answer once the run completed. A run on a thread leaves out the thread's earlier messages
   * (`client.thread(id).messages()` has them). Empty for a workflow run: see `steps`.
   */
  readonly messages: ChatMessage[];
  /** A workflow run's agent steps that have begun, each with its conversation, in the record's step order. */
  readonly steps?: { readonly step_id: string; readonly messages: ChatMessage[] }[];
}

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
  stream(run_id: string, options?: StreamOptions): AsyncIterable<StreamChunk>;
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
  close(): Promise<void>;
}

/** What `client.thread(id)` gives. A bad thread id is an `invalid_request` naming `thread_id`. */
export interface ThreadHandle {
  /** The thread's messages, oldest first (empty for a thread with none). */
  messages(): Promise<ChatMessage[]>;
  /** The thread's runs in enqueue order (those retention has removed are left out). */
  runs(): Promise<RunRecord[]>;
  /** Deletes the thread's messages and line of runs; true when there was a thread. */
  delete(): Promise<boolean>;
}

// Pub/sub wakes waiters at once; the poll only covers a message lost to a reconnect.
const WAIT_POLL_MS = 2_000;
// How long a wait waits for its subscription before its first read (the poll covers the rest).
const SUBSCRIBE_WAIT_MS = 1_000;
// Registrations are reused this long, saving a round trip per enqueue.
const REGISTRATION_CACHE_MS = 5_000;
// A stream reader's blocking read returns at least this often, to notice a run that ended without an `end` chunk.
const STREAM_BLOCK_MS = 2_000;
const SAFE_ID = /^[A-Za-z0-9_.-]{1,200}$/;

/** The step an agent run's loop runs as. */
const AGENT_RUN_STEP_ID = 's1';

/** A step's conversation with its final answer after it (the answer is the run's output, not a message of its state). */
function withAnswer(messages: ChatMessage[], answer: string | undefined): ChatMessage[] {
  return messages.length > 0 && answer !== undefined ? [...messages, { role: 'assistant', content: answer }] : messages;
}

/** A run id of the form arcflow keeps, before it goes into any key; else a clear error. */
function checkRunId(run_id: unknown): string {
  if (typeof run_id !== 'string' || !NamePattern.runId.test(run_id)) {
    throw new RequestError('invalid_run_id', `run_id must match ${NamePattern.runId}, got ${JSON.stringify(run_id)?.slice(0, 120)}`);
  }
  return run_id;
}

function checkToolCallId(tool_call_id: unknown): void {
  if (typeof tool_call_id !== 'string' || !NamePattern.toolCallId.test(tool_call_id)) {
    throw new RequestError('invalid_request', `tool_call_id must match ${NamePattern.toolCallId}, got ${JSON.stringify(tool_call_id)?.slice(0, 120)}`);
  }
}

/** The client for backend services: enqueue runs, read them, wait for them, cancel them. */
export function createClient(options: ClientOptions = {}): ArcflowClient {
  const env = clientEnv();
  const connection = resolveConnection({ ...options, redis: options.redis ?? env.redis, prefix: options.prefix ?? env.prefix });
  // Commands never wait in a queue while Redis is away, and a command whose reply was lost is not
  // sent again: `reach` tries the whole operation again, so nothing runs after the caller was told
  // it failed. A restart shorter than `redis_timeout_ms` goes unnoticed.
  const redis = coalesceWrites(connectRedis(connection.redis, { maxRetriesPerRequest: 1, enableOfflineQueue: false, autoResendUnfulfilledCommands: false, lazyConnect: false }));
  const health = watchConnection(redis, connection.redis, silentLogger);
  const timeoutMs = options.redis_timeout_ms ?? CLIENT_DEFAULTS.redis_timeout_ms;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new ConfigError(`redis_timeout_ms must be an integer >= 1, got ${JSON.stringify(timeoutMs)}`);
  const reach = <T>(operation: () => Promise<T>) => withRedis(redis, connection.redis, timeoutMs, health, operation);
  const store = new RunStore(redis, connection.prefix, connection.retention_seconds);
  const registry = new Registry(redis, store.keys, WORKER_DEFAULTS.heartbeat_ttl_ms);
  const registrations = new Map<string, { registration: AgentRegistration; at: number }>();
  const lookup = async (agent: string): Promise<AgentRegistration | undefined> => {
    const cached = registrations.get(agent);
    if (cached && Date.now() - cached.at < REGISTRATION_CACHE_MS) return cached.registration;
    const registration = await registry.registration(agent);
    if (registration) registrations.set(agent, { registration, at: Date.now() });
    else registrations.delete(agent);
    return registration;
  };
  let subscriber: Redis | undefined;
  /** The partitions' finished channels subscribed to (sharded pub/sub), one per tag, on first wait in it. */
  const subscribed = new Map<string, Promise<unknown>>();
  const waiters = new Map<string, Set<() => void>>();
  const subscribe = (run_id: string) => {
    if (!subscriber) {
      // Subscriptions wait out a reconnect and are restored after it; `wait` also polls.
      subscriber = duplicateRedis(redis, { enableOfflineQueue: true, maxRetriesPerRequest: null });
      subscriber.on('error', () => undefined);
      subscriber.on('smessage', (_channel: string, finished: string) => {
        for (const wake of waiters.get(finished) ?? []) wake();
      });
    }
    const channel = store.keys.finishedChannelIn(store.keys.tagOf(run_id));
    let done = subscribed.get(channel);
    if (!done) {
      // A subscription that failed is tried again by the next wait; this one polls meanwhile.
      done = subscriber.ssubscribe(channel).catch(() => subscribed.delete(channel));
      subscribed.set(channel, done);
    }
    return done;
  };

  const threads = new ThreadStore(redis, store.keys, connection.prefix, store.partitions);
  const context: ClientContext = { redis, store, threads, registry, prefix: connection.prefix, lookup, reach };
  /**
   * The queue operations (enqueue, queue depths, approvals, removing a cancelled call's job), with
   * BullMQ behind them: imported on the first call that needs them, so reading runs never loads it.
   */
  let loadedJobs: Promise<ClientJobs> | undefined;
  const jobs = (): Promise<ClientJobs> =>
    (loadedJobs ??= import('./enqueue.ts').then(
      ({ ClientJobs }) => new ClientJobs(context),
      (error: unknown) => {
        loadedJobs = undefined; // a failed import is tried again by the next call
        throw error;
      },
    ));
  /** Where a cancel's closed calls have their queued jobs removed; BullMQ loads only when there are some. */
  const toolJobs: CallQueues = {
    removeToolJob: async (call, run_id, job_id) => (await jobs()).removeToolJob(call, run_id, job_id),
    join: async (target, data) => (await jobs()).join(target, data),
  };

  /** A workflow run's cancel: its running steps are cancelled, the rest skipped; its completed sinks are its output. */
  const cancelledWorkflow = async (run_id: string, workflow: string): Promise<RunEnding> => {
    const graph = (await lookup(workflow))?.workflow;
    const output = graph ? workflowOutput(graph, await store.workflows.outputs(run_id, sinkSteps(graph))) : undefined;
    return {
      outcome: { status: 'cancelled', ...(output !== undefined ? { output } : {}) },
      step_id: RUN_STEP_ID,
      steps: { running: 'cancelled', skip_reason: 'cancelled' },
    };
  };

  const client: ArcflowClient = {
    async enqueue(request) {
      if (typeof request?.agent !== 'string' || !NamePattern.agent.test(request.agent)) {
        throw new RequestError('invalid_request', `agent must match ${NamePattern.agent}, got ${JSON.stringify(request?.agent)?.slice(0, 120)}`);
      }
      checkEnqueueOptions(request);
      // A string, or a list of messages checked message by message (SPEC §11): a refusal names the index and field.
      checkRunInput(request.input);
      if (request.idempotency_key !== undefined && !SAFE_ID.test(request.idempotency_key)) {
        throw new RequestError('invalid_request', 'idempotency_key must be 1-200 characters of letters, digits, _ . -');
      }
      // Checked for any run here; against a workflow's graph once the registry names it one (see ClientJobs.enqueue).
      checkExecConfig(request.exec_config);
      // A thread (SPEC §11): its id, and what a run does when the thread is busy.
      if (request.thread_id !== undefined) checkThreadId(request.thread_id);
      if (request.on_busy !== undefined) checkOnBusy(request.on_busy);
      if (request.stream !== undefined && typeof request.stream !== 'boolean') {
        throw new RequestError('invalid_request', `stream must be true or false, got ${JSON.stringify(request.stream)?.slice(0, 40)}`);
      }
      return (await jobs()).enqueue(request);
    },

    agents: () =>
      reach(async () => {
        const names = await registry.known();
        const found = await Promise.all(names.map(async (name) => ({ name, registration: await registry.registration(name), live_workers: await registry.liveWorkers(name) })));
        return found.flatMap(({ name, registration, live_workers }) =>
          registration
            ? [
                registration.workflow
                  ? { name, kind: 'workflow' as const, tools: registration.tools, live_workers, steps: registration.workflow.steps }
                  : { name, kind: 'agent' as const, tools: registration.tools, live_workers },
              ]
            : [],
        );
      }),

    queues: async () => (await jobs()).queueInfos(),

    list: async (query) => {
      const checked = checkListQuery(query);
      return reach(() => store.listRuns(checked));
    },

    get: async (run_id) => {
      checkRunId(run_id);
      return reach(() => store.getRun(run_id));
    },

    async wait(run_id, waitOptions = {}) {
      checkRunId(run_id);
      const timeoutMs = waitOptions.timeout_ms ?? 60_000;
      if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
        throw new RequestError('invalid_request', `timeout_ms must be a number of milliseconds >= 0, got ${JSON.stringify(timeoutMs)}`);
      }
      const deadline = Date.now() + timeoutMs;
      // Subscribed before the first read, so a run ending in between still wakes it; bounded, since a
      // subscription waits for Redis to come back (the read below fails in redis_timeout_ms instead).
      let subscribeTimer: NodeJS.Timeout | undefined;
      await Promise.race([subscribe(run_id), new Promise((resolve) => (subscribeTimer = setTimeout(resolve, SUBSCRIBE_WAIT_MS)))]);
      clearTimeout(subscribeTimer);
      let wake: () => void = () => {};
      const set = waiters.get(run_id) ?? new Set();
      waiters.set(run_id, set);
      try {
        for (;;) {
          const woken = new Promise<void>((resolve) => {
            wake = resolve;
            set.add(resolve);
          });
          const run = await reach(() => store.getRun(run_id));
          if (!run) throw unknownRun(run_id, connection.prefix);
          const left = deadline - Date.now();
          if (TERMINAL_STATUSES.has(run.status) || left <= 0) return run;
          // Pub/sub wakes us at once; the poll covers a missed message.
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([woken, new Promise((resolve) => (timer = setTimeout(resolve, Math.min(WAIT_POLL_MS, left))))]);
          clearTimeout(timer);
          set.delete(wake);
        }
      } finally {
        set.delete(wake);
        if (set.size === 0) waiters.delete(run_id);
      }
    },

    events(run_id, eventOptions = {}) {
      checkRunId(run_id);
      return {
        async *[Symbol.asyncIterator]() {
          let next = 0;
          for (;;) {
            const batch = await reach(() => store.events(run_id, next));
            for (const event of batch) yield event;
            next += batch.length;
            const ended = batch.some((event) => RUN_TERMINAL_KINDS.has(event.kind));
            if (!eventOptions.follow || ended) return;
            if (next === 0 && !(await reach(() => store.status(run_id)))) throw unknownRun(run_id, connection.prefix);
            await new Promise((resolve) => setTimeout(resolve, eventOptions.poll_ms ?? 100));
          }
        },
      };
    },

    stream(run_id, streamOptions = {}) {
      checkRunId(run_id);
      const after = checkAfter(streamOptions.after);
      const following = {
        streams: store.streams,
        openReader: () => duplicateRedis(redis, { maxRetriesPerRequest: 1, enableOfflineQueue: false }),
        closeReader: closeRedis,
        reach: <T>(reader: Redis, operation: () => Promise<T>) => withRedis(reader, connection.redis, timeoutMs, health, operation),
        status: (id: string) => store.status(id),
        blockMs: Math.max(100, Math.min(STREAM_BLOCK_MS, Math.floor(timeoutMs / 2))),
      };
      return { [Symbol.asyncIterator]: () => followStream(following, run_id, after) };
    },

    async cancel(run_id) {
      checkRunId(run_id);
      return reach(async () => {
        const [status, workflow] = (await redis.hmget(store.keys.record(run_id), 'status', 'workflow')) as [RunRecord['status'] | null, string | null];
        if (!status) throw unknownRun(run_id, connection.prefix);
        const ending = workflow ? await cancelledWorkflow(run_id, workflow) : { outcome: { status: 'cancelled' as const }, step_id: 's1' };
        const { ended, closed, facts } = await endRun(store, run_id, ending);
        if (ended) await stopClosedWork(redis, store, toolJobs, run_id, closed);
        // A child run's parent gets its call's result now (SPEC §13): the cancel is the child's failure.
        if (ended && facts?.parent_run_id) await settleParentOf(store, toolJobs, run_id, true);
        // A thread's next run starts now (SPEC §11): a run waiting in the line holds no job until then.
        if (ended && (await threads.isThreadRun(run_id))) await (await jobs()).startNextOnThread(run_id);
        return { cancelled: ended, status: (await store.status(run_id)) ?? status };
      });
    },

    async approve(run_id, tool_call_id, answer) {
      checkRunId(run_id);
      checkToolCallId(tool_call_id);
      const problem = answerProblem(answer);
      if (problem) throw new RequestError('invalid_request', problem);
      return (await jobs()).approve(run_id, tool_call_id, answer);
    },

    async submitToolResult(run_id, tool_call_id, answer) {
      checkRunId(run_id);
      checkToolCallId(tool_call_id);
      const problem = toolResultProblem(answer);
      if (problem) throw new RequestError('invalid_request', problem);
      return (await jobs()).submitToolResult(run_id, tool_call_id, answer);
    },

    async messages(run_id) {
      checkRunId(run_id);
      return reach(async () => {
        const run = await store.getRun(run_id);
        if (!run) throw new RequestError('unknown_run', `unknown run '${run_id}'`);
        const conversation = async (step_id: string, status: string | undefined, output: string | undefined) =>
          withAnswer(await store.stepConversation(run_id, step_id), status === 'completed' ? output : undefined);
        if (!run.workflow) return { run_id, messages: await conversation(AGENT_RUN_STEP_ID, run.status, run.output) };
        const steps = await Promise.all(
          Object.entries(run.steps ?? {}).map(async ([step_id, step]) => ({ step_id, messages: await conversation(step_id, step.status, step.output) })),
        );
        return { run_id, messages: [], steps: steps.filter((step) => step.messages.length > 0) };
      });
    },

    thread(thread_id) {
      const checked = () => checkThreadId(thread_id);
      return {
        messages: async () => reach(() => threads.messages(checked())),
        runs: async () =>
          reach(async () => {
            const records = await Promise.all((await threads.runIds(checked())).map((run_id) => store.getRun(run_id)));
            return records.filter((record): record is RunRecord => record !== undefined);
          }),
        delete: async () => reach(() => threads.delete(checked())),
      };
    },

    async close() {
      // Queues opened by an earlier call (one still importing is waited for); a failed import opened none.
      if (loadedJobs) await (await loadedJobs.catch(() => undefined))?.close();
      if (subscriber) await closeRedis(subscriber);
      await closeRedis(redis);
    },
  };
  return client;
}
