import type { TraceEvent } from '@arcflow/core';
import { RunStore, connectRedis, resolveConnection } from '@arcflow/queue/client';

/** Each round's tool call ids in the model's order, by {@link roundKey}. */
export type CallOrder = ReadonlyMap<string, readonly string[]>;

export const roundKey = (step_id: string, iteration: number) => `${step_id}|${iteration}`;

/**
 * The model's order of each round's tool calls, read from the run's recorded responses. The
 * events alone give the order calls ended in, which is not it: invalid calls are answered before
 * the valid ones start, and those run in parallel.
 */
export async function readCallOrder(options: { redis?: string; prefix?: string }, run_id: string, events: readonly TraceEvent[]): Promise<CallOrder> {
  const rounds = events.flatMap((event) =>
    event.kind === 'ProviderResponseReceived' && event.tool_calls_count > 0 ? [{ step_id: event.step_id, iteration: event.iteration }] : [],
  );
  if (rounds.length === 0) return new Map();
  const connection = resolveConnection(options);
  const redis = connectRedis(connection.redis, { maxRetriesPerRequest: 2 });
  try {
    const ids = await new RunStore(redis, connection.prefix, connection.retention_seconds).toolCallIds(run_id, rounds);
    return new Map(rounds.flatMap(({ step_id, iteration }, index) => (ids[index] ? [[roundKey(step_id, iteration), ids[index]!] as const] : [])));
  } finally {
    redis.disconnect();
  }
}
