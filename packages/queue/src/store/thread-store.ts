import type { ChatMessage } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { type Keys, hashTag, threadKeys } from '../keys.ts';
import { partitionOfKey, partitionTag } from '../partitions.ts';
import type { PartitionMap } from './partition-map.ts';
import { StoredFormatError } from './formats.ts';
import { type StoreScripts, storeScripts } from './script-runner.ts';

/** A thread run's conversation so far, as its first call reads it (see `threadHistory.lua`). */
export interface ThreadHistory {
  readonly thread_id: string;
  readonly messages: readonly ChatMessage[];
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

  /** The partition a thread's runs are minted in among `count` (undefined: the prefix's own tag). */
  static partitionOf(thread_id: string, count: number): number | undefined {
    return count <= 1 ? undefined : partitionOfKey(`thread:${thread_id}`, count);
  }

  /** The hash tag a thread's keys live under now. */
  async tagOf(thread_id: string): Promise<string> {
    const { count } = await this.partitions.read();
    const k = ThreadStore.partitionOf(thread_id, count);
    return k === undefined ? hashTag(this.prefix) : partitionTag(this.prefix, k);
  }

  /** Puts a created run on its thread, once (before its first job is added). */
  async join(run_id: string, thread_id: string): Promise<void> {
    await this.scripts.joinThread([this.keys.record(run_id)], [thread_id]);
  }

  /** The conversation a thread run starts on; undefined for a run on no thread. */
  async history(run_id: string): Promise<ThreadHistory | undefined> {
    const [thread_id, , ...lines] = (await this.scripts.threadHistory([this.keys.record(run_id)], [])) as [string?, number?, ...string[]];
    if (thread_id === undefined) return undefined;
    return { thread_id, messages: lines.map((line, at) => readThreadMessage(line, `thread ${thread_id}[${at}]`)) };
  }

  /** How many of a run's first messages came before its own (instructions aside); undefined off a thread. */
  async base(run_id: string): Promise<number | undefined> {
    const [thread_id, base] = await this.redis.hmget(this.keys.record(run_id), 'thread_id', 'thread_base');
    return thread_id == null ? undefined : Number(base ?? 0);
  }

  /** Stages a thread run's own messages, for the write that completes it to append to the thread. */
  async stage(run_id: string, messages: readonly ChatMessage[]): Promise<boolean> {
    return (await this.scripts.stageThreadMessages([this.keys.record(run_id)], { messages: messages.map((message) => JSON.stringify(message)) })) === 1;
  }

  /** A thread's messages, oldest first. */
  async messages(thread_id: string): Promise<ChatMessage[]> {
    const lines = await this.redis.lrange(threadKeys(await this.tagOf(thread_id), thread_id).messages, 0, -1);
    return lines.map((line, at) => readThreadMessage(line, `thread ${thread_id}[${at}]`));
  }

  /** A thread's run ids, in enqueue order. */
  async runIds(thread_id: string): Promise<string[]> {
    return this.redis.lrange(threadKeys(await this.tagOf(thread_id), thread_id).runs, 0, -1);
  }

  /** Deletes a thread's messages and its list of runs (its runs stay, as runs). True when there was one. */
  async delete(thread_id: string): Promise<boolean> {
    const keys = threadKeys(await this.tagOf(thread_id), thread_id);
    return (await this.redis.del(keys.messages, keys.runs)) > 0;
  }
}

/** A thread's message as stored: JSON of an object with a role. */
function readThreadMessage(json: string, what: string): ChatMessage {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new StoredFormatError(what, 'unparseable');
  }
  if (typeof value !== 'object' || value === null || typeof (value as { role?: unknown }).role !== 'string') throw new StoredFormatError(what, 'malformed');
  return value as ChatMessage;
}
