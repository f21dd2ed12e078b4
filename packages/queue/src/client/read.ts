import { type ChatMessage, RUN_TERMINAL_KINDS, RequestError, type RunRecord, type StreamChunk, type TraceEvent, checkThreadId } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { duplicateRedis } from '../redis/connect.ts';
import { closeRedis, withRedis } from '../redis/connection.ts';
import { unknownRun } from '../runs/unknown-run.ts';
import { type StreamOptions, checkAfter, followStream } from '../streams/follow.ts';
import type { OpenedClient } from './context.ts';

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

/** What `client.thread(id)` gives. A bad thread id is an `invalid_request` naming `thread_id`. */
export interface ThreadHandle {
  /** The thread's messages, oldest first (empty for a thread with none). */
  messages(): Promise<ChatMessage[]>;
  /** The thread's runs in enqueue order (those retention has removed are left out). */
  runs(): Promise<RunRecord[]>;
  /** Deletes the thread's messages and line of runs; true when there was a thread. */
  delete(): Promise<boolean>;
}

// A stream reader's blocking read returns at least this often, to notice a run that ended without an `end` chunk.
const STREAM_BLOCK_MS = 2_000;

/** The step an agent run's loop runs as. */
const AGENT_RUN_STEP_ID = 's1';

/** The run's events in order; with `follow`, keeps reading until the run ends. */
export function runEvents({ store, reach, prefix }: OpenedClient, run_id: string, options: { follow?: boolean; poll_ms?: number }): AsyncIterable<TraceEvent> {
  const pollMs = options.poll_ms ?? 100;
  // A poll that is not a sane number of milliseconds would spin: refused before the first read.
  if (!Number.isInteger(pollMs) || pollMs < 10 || pollMs > 60_000) {
    throw new RequestError('invalid_request', `poll_ms must be an integer from 10 to 60000, got ${JSON.stringify(pollMs)?.slice(0, 40)}`);
  }
  return {
    async *[Symbol.asyncIterator]() {
      let next = 0;
      let lastTs = 0;
      for (;;) {
        const batch = await reach(() => store.events(run_id, next, lastTs));
        for (const event of batch) yield event;
        next += batch.length;
        lastTs = batch.at(-1)?.ts ?? lastTs;
        const ended = batch.some((event) => RUN_TERMINAL_KINDS.has(event.kind));
        // Every run has its RunEnqueued: none at all is a run not kept (or another prefix's).
        if (next === 0 && !(await reach(() => store.status(run_id)))) throw unknownRun(run_id, prefix);
        if (!options.follow || ended) return;
        await new Promise((resolve) => setTimeout(resolve, pollMs));
      }
    },
  };
}

/** The run's stream (SPEC §12), an async iterator on a Redis connection of its own from its first read to its last. */
export function runStream(client: OpenedClient, run_id: string, options: StreamOptions): AsyncIterableIterator<StreamChunk> {
  const { store, redis, url, timeoutMs, health } = client;
  const after = checkAfter(options.after);
  const following = {
    streams: store.streams,
    openReader: () => duplicateRedis(redis, { maxRetriesPerRequest: 1, enableOfflineQueue: false }),
    closeReader: closeRedis,
    reach: <T>(reader: Redis, operation: () => Promise<T>) => withRedis(reader, url, timeoutMs, health, operation),
    status: (id: string) => store.status(id),
    blockMs: Math.max(100, Math.min(STREAM_BLOCK_MS, Math.floor(timeoutMs / 2))),
    prefix: client.prefix,
  };
  return followStream(following, run_id, after);
}

/** The run's conversation so far, step by step; `unknown_run` for a run not kept. */
export function runMessages({ store, reach, prefix }: OpenedClient, run_id: string): Promise<RunMessages> {
  return reach(async () => {
    const run = await store.getRun(run_id);
    if (!run) throw unknownRun(run_id, prefix);
    const conversation = async (step_id: string, status: string | undefined, output: string | undefined) =>
      withAnswer(await store.stepConversation(run_id, step_id), status === 'completed' ? output : undefined);
    if (!run.workflow) return { run_id, messages: await conversation(AGENT_RUN_STEP_ID, run.status, run.output) };
    const steps = await Promise.all(Object.entries(run.steps ?? {}).map(async ([step_id, step]) => ({ step_id, messages: await conversation(step_id, step.status, step.output) })));
    return { run_id, messages: [], steps: steps.filter((step) => step.messages.length > 0) };
  });
}

/** A step's conversation with its final answer after it (the answer is the run's output, not a message of its state). */
function withAnswer(messages: ChatMessage[], answer: string | undefined): ChatMessage[] {
  return messages.length > 0 && answer !== undefined ? [...messages, { role: 'assistant', content: answer }] : messages;
}

/** `client.thread(id)`: the id is checked by each call. */
export function threadHandle({ store, threads, reach }: OpenedClient, thread_id: string): ThreadHandle {
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
}
