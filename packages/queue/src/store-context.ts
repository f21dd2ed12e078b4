import type { Redis } from 'ioredis';
import { EVENT_CODEC, type EventCodec } from './records/event-codec.ts';
import { type Keys, keysFor } from './redis/keys.ts';
import { type StoreScripts, storeScripts } from './scripts.ts';

/**
 * What every store is built from, once per connection: the connection, the prefix's key names,
 * the scripts, how events are encoded for them, and how long an ended run is kept. A store is
 * handed this (and the other stores it reads), never the store that holds it.
 */
export interface StoreContext {
  readonly redis: Redis;
  readonly prefix: string;
  readonly keys: Keys;
  readonly scripts: StoreScripts;
  readonly codec: EventCodec;
  /** How long an ended run's keys are kept, in seconds. */
  readonly retentionSeconds: number;
}

export function storeContext(redis: Redis, prefix: string, retentionSeconds: number): StoreContext {
  return { redis, prefix, keys: keysFor(prefix), scripts: storeScripts(redis), codec: EVENT_CODEC, retentionSeconds };
}
