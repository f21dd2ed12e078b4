/**
 * Every Redis key and queue name arcflow uses, built in this one file. All share one hash tag,
 * `{prefix}`, so a run's keys and its BullMQ flows live in one slot (Redis Cluster, Dragonfly).
 */
export function hashTag(prefix: string): string {
  return `{${prefix}}`;
}

export interface Keys {
  readonly tag: string;
  readonly run: (run_id: string) => RunKeys;
  readonly idempotency: (key: string) => string;
  readonly agent: (name: string) => string;
  readonly agentWorkers: (name: string) => string;
  readonly workers: string;
  readonly cancelChannel: string;
  readonly finishedChannel: string;
}

export interface RunKeys {
  readonly record: string;
  readonly events: string;
  /** Dedupe keys of events written exactly once. */
  readonly dedupe: string;
  /** Calls fanned out and not yet settled: `iteration|tool_call_id` → call info. */
  readonly open: string;
  /** Every key of the run, so retention can expire them together. */
  readonly index: string;
  readonly state: (step_id: string) => string;
  readonly response: (step_id: string, iteration: number) => string;
  readonly results: (step_id: string, iteration: number) => string;
  /** The `execute_tool` span of each call of a round (`tool_call_id` → traceparent), for the join's links. */
  readonly spans: (step_id: string, iteration: number) => string;
}

export function keysFor(prefix: string): Keys {
  const tag = hashTag(prefix);
  return {
    tag,
    run: (run_id) => {
      const base = `${tag}:run:${run_id}`;
      return {
        record: base,
        events: `${base}:events`,
        dedupe: `${base}:dedupe`,
        open: `${base}:open`,
        index: `${base}:keys`,
        state: (step_id) => `${base}:${step_id}:state`,
        response: (step_id, iteration) => `${base}:${step_id}:response:${iteration}`,
        results: (step_id, iteration) => `${base}:${step_id}:results:${iteration}`,
        spans: (step_id, iteration) => `${base}:${step_id}:spans:${iteration}`,
      };
    },
    idempotency: (key) => `${tag}:idempotency:${key}`,
    agent: (name) => `${tag}:agent:${name}`,
    agentWorkers: (name) => `${tag}:agent:${name}:workers`,
    workers: `${tag}:workers`,
    cancelChannel: `${tag}:cancel`,
    finishedChannel: `${tag}:finished`,
  };
}

/** Queue names (BullMQ forbids `:` in them). */
export const QueueName = {
  provider: (provider_id: string) => `provider-${provider_id}`,
  tool: (tool_name: string) => `tool-${tool_name}`,
} as const;

/** BullMQ job ids: deterministic, so a re-delivered fan-out adds nothing twice. No `:` allowed. */
export const JobId = {
  provider: (run_id: string, step_id: string, iteration: number) => `${run_id}.${step_id}.p${iteration}`,
  tool: (run_id: string, step_id: string, iteration: number, tool_call_id: string) =>
    `${run_id}.${step_id}.i${iteration}.${tool_call_id.replace(/[^A-Za-z0-9_.-]/g, '_')}`,
} as const;
