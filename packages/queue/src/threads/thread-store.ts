import { type ChatMessage, type OnBusy, RequestError, type RunStatus, type StateChange, TERMINAL_STATUSES } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { type Keys, hashTag, threadKeys } from '../redis/keys.ts';
import { partitionOfKey, partitionTag } from '../redis/partitions.ts';
import type { PartitionMap } from '../redis/partition-map.ts';
import type { RunSpec } from '../records/run-spec.ts';
import { readMessage } from '../records/formats.ts';
import { type StoreScripts, storeScripts } from '../scripts.ts';
import type { ThreadPlace } from '../steps/transcripts.ts';

/**
 * Where a thread run's conversation so far is, as its first call finds it (see `threadHistory.lua`),
 * with how many entries its state log holds then; `waiting` while another run of its thread is active.
 */
export type ThreadHistory = (ThreadPlace & { readonly state_entries: number }) | { readonly thread_id: string; readonly waiting: true };

/** A thread run's first job: its agent's provider queue and the attempts it gets. */
export interface ThreadJobSpec {
  readonly queue: string;
  readonly attempts: number;
}

/** The run a thread's line made active and that has not started: what adding its first job takes. */
export interface NextOnThread {
  readonly run_id: string;
  readonly agent: string;
  readonly trace: RunSpec['trace'];
  readonly job: ThreadJobSpec | undefined;
}

/** A record's `thread_job`, if it holds one that can be read. */
function readJobSpec(text: string | null): ThreadJobSpec | undefined {
  const value = parseJson(text) as Partial<ThreadJobSpec> | undefined;
  if (typeof value?.queue !== 'string' || !Number.isSafeInteger(value.attempts) || value.attempts! < 1) return undefined;
  return { queue: value.queue, attempts: value.attempts! };
}

function parseJson(text: string | null): Record<string, unknown> | undefined {
  if (text == null) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** What joining its thread made of a new run (see `joinThread.lua`), and the thread's active run. */
export interface ThreadJoin {
  readonly decision: 'start' | 'wait' | 'busy' | 'steered';
  readonly active: string;
}

/**
 * Threads (SPEC §11), in Redis: a thread's messages (appended by the write that completes one of
 * its runs, see `finish.lua`) and its runs in enqueue order. A thread's keys live under the tag of
 * the partition its runs are minted in (`partitionOf`), so each of its runs' scripts reaches them.
 */
export class ThreadStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly prefix: string,
    private readonly partitions: PartitionMap,
    private readonly scripts: StoreScripts = storeScripts(redis),
  ) {}

  /** Which runs are on a thread, as this process has learnt (a run's thread never changes). */
  private readonly onThread = new Map<string, boolean>();

  /** Whether a run is on a thread: asked of Redis once per run and process. */
  async isThreadRun(run_id: string): Promise<boolean> {
    const known = this.onThread.get(run_id);
    if (known !== undefined) return known;
    const found = (await this.redis.hexists(this.keys.record(run_id), 'thread_id')) === 1;
    // Bounded: a worker that has seen many runs forgets them all and asks again.
    if (this.onThread.size >= 10_000) this.onThread.clear();
    this.onThread.set(run_id, found);
    return found;
  }

  /** The partition a thread's runs are minted in among `count` (undefined: the prefix's own tag). */
  static partitionOf(thread_id: string, count: number): number | undefined {
    return count <= 1 ? undefined : partitionOfKey(`thread:${thread_id}`, count);
  }

  /**
   * Where a thread lives: the partition its keys exist in, looked for under every partition count
   * the map has had (a thread begun before partitions were added stays where it began, and its
   * later runs are minted there), else the partition its id hashes to now. `k` undefined: the
   * prefix's own tag.
   */
  async locate(thread_id: string): Promise<{ readonly k: number | undefined; readonly tag: string }> {
    const { count, history } = await this.partitions.read();
    const places = new Map<string, number | undefined>();
    for (const n of [count, ...[...history].reverse(), 1]) {
      const k = ThreadStore.partitionOf(thread_id, n);
      places.set(k === undefined ? hashTag(this.prefix) : partitionTag(this.prefix, k), k);
    }
    const entries = [...places];
    const found = await Promise.all(entries.map(([tag]) => this.redis.exists(threadKeys(tag, thread_id).runs)));
    const [tag, k] = entries[Math.max(0, found.indexOf(1))]!;
    return { k, tag };
  }

  /** The hash tag a thread's keys live under. */
  async tagOf(thread_id: string): Promise<string> {
    return (await this.locate(thread_id)).tag;
  }

  /**
   * Puts a created run on its thread, once (before any job of it is added): see {@link ThreadJoin}.
   * `start`: the run's first job, kept for the process that makes the run active later (a run that
   * waits holds no job); `follow_up_trace`: the trace of the run that takes this run's messages if
   * it steers them into a run that ends without them reaching the thread.
   */
  async join(
    run_id: string,
    thread_id: string,
    on_busy: OnBusy,
    input: readonly ChatMessage[],
    retention_seconds: number,
    start?: ThreadJobSpec,
    follow_up_trace?: string,
  ): Promise<ThreadJoin> {
    const [decision, active] = (await this.scripts.joinThread([this.keys.record(run_id)], {
      thread_id,
      on_busy,
      messages: input.map((message) => JSON.stringify(message)),
      ts: Date.now(),
      retention_seconds,
      ...(start ? { job: JSON.stringify(start) } : {}),
      ...(follow_up_trace ? { follow_up_trace } : {}),
    })) as [ThreadJoin['decision'], string];
    return { decision, active };
  }

  /** The messages steered into the run that call `iteration` takes (the same for every delivery of it). */
  async take(run_id: string, step_id: string, iteration: number): Promise<ChatMessage[]> {
    const lines = (await this.scripts.takeInjected([this.keys.record(run_id)], [step_id, iteration])) as string[];
    return lines.map((line, at) => readMessage(line, `messages steered into ${run_id}[${at}]`));
  }

  /**
   * The run a thread run's end made active, while it has not started: its id, agent, trace and
   * first job (undefined when its record names none: it was enqueued by an earlier version, whose
   * run holds a delayed job).
   */
  async next(run_id: string): Promise<NextOnThread | undefined> {
    const thread_id = await this.redis.hget(this.keys.record(run_id), 'thread_id');
    if (thread_id == null) return undefined;
    const active = await this.redis.get(threadKeys(this.keys.tagOf(run_id), thread_id).active);
    if (active === null || active === run_id) return undefined;
    return this.startable(active);
  }

  /** A queued run that is its thread's active run: what starting it takes. */
  private async startable(run_id: string): Promise<NextOnThread | undefined> {
    const [status, agent, trace, job] = await this.redis.hmget(this.keys.record(run_id), 'status', 'agent', 'trace', 'thread_job');
    if (status !== 'queued' || agent == null) return undefined;
    return { run_id, agent, trace: (parseJson(trace ?? null) ?? {}) as RunSpec['trace'], job: readJobSpec(job ?? null) };
  }

  /**
   * Whether a run waits in its thread's line: queued behind an active run that has not ended. A
   * run in a line whose active run ended without handing on (its record gone) is not waiting: its
   * first call takes its turn (see `threadHistory.lua`).
   */
  async waitsInLine(run_id: string): Promise<boolean> {
    const [thread_id, status] = await this.redis.hmget(this.keys.record(run_id), 'thread_id', 'status');
    if (thread_id == null || status !== 'queued') return false;
    const active = await this.redis.get(threadKeys(this.keys.tagOf(run_id), thread_id).active);
    if (active === null || active === run_id) return false;
    const activeStatus = await this.redis.hget(this.keys.record(active), 'status');
    return activeStatus !== null && !TERMINAL_STATUSES.has(activeStatus as RunStatus);
  }

  /** Where the conversation a thread run starts on is; undefined for a run on no thread. */
  async history(run_id: string): Promise<ThreadHistory | undefined> {
    const [thread_id, count, origin, state_entries] = (await this.scripts.threadHistory([this.keys.record(run_id)], [])) as [string?, number?, string?, number?];
    if (thread_id === undefined) return undefined;
    if (count === -1) return { thread_id, waiting: true };
    return { thread_id, origin: origin!, count: count!, state_entries: state_entries! };
  }

  /** How many of a run's first messages came before its own (instructions aside); undefined off a thread. */
  async base(run_id: string): Promise<number | undefined> {
    const [thread_id, base] = await this.redis.hmget(this.keys.record(run_id), 'thread_id', 'thread_base');
    return thread_id == null ? undefined : Number(base ?? 0);
  }

  /**
   * Stages a thread run's conversation for the write that completes it to copy onto the thread:
   * `ranges` of its transcript list (flat from, to pairs), then `answer`; and the run state it
   * leaves (SPEC §17).
   */
  async stage(run_id: string, ranges: readonly number[], answer: ChatMessage, state: readonly StateChange[] = []): Promise<boolean> {
    return (await this.scripts.stageThreadMessages([this.keys.record(run_id)], { ranges, answer: JSON.stringify(answer), state: JSON.stringify(state) })) === 1;
  }

  /** A thread's messages, oldest first. */
  async messages(thread_id: string): Promise<ChatMessage[]> {
    const lines = await this.redis.lrange(threadKeys(await this.tagOf(thread_id), thread_id).messages, 0, -1);
    return lines.map((line, at) => readMessage(line, `thread ${thread_id}[${at}]`));
  }

  /** A thread's run ids, in enqueue order. */
  async runIds(thread_id: string): Promise<string[]> {
    return this.redis.lrange(threadKeys(await this.tagOf(thread_id), thread_id).runs, 0, -1);
  }

  /**
   * Deletes a thread's messages and its list of runs (its runs stay, as runs). True when there was
   * one; refused (`thread_busy`) while a run of it is active, which reads the messages it began on.
   */
  async delete(thread_id: string): Promise<boolean> {
    const keys = threadKeys(await this.tagOf(thread_id), thread_id);
    const [outcome, active] = (await this.scripts.deleteThread([keys.messages], [])) as [number, string?];
    if (outcome === -1)
      throw new RequestError('thread_busy', `thread '${thread_id}' is busy: run '${active}' is active; cancel it or wait for it to end before deleting the thread`);
    return outcome === 1;
  }
}
