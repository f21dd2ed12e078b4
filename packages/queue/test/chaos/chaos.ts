import { RUN_TERMINAL_KINDS, TOOL_TERMINAL_KINDS, type TraceEvent } from '@arcflow/core';
import { type ArcflowClient, createClient } from '@arcflow/queue';
import { assertEventInvariants, startPrivateRedis } from '@arcflow/testing';
import { WorkerFleet } from './worker-fleet.ts';
import { Redis } from 'ioredis';

const FIXTURE = new URL('./chaos-agents.ts', import.meta.url).pathname;
const PREFIX = 'chaos';

export interface ChaosOptions {
  readonly runs: number;
  readonly workers: number;
  /**
   * A random worker is SIGKILLed this often (whatever a worker takes to start), and a new one
   * started beside the others.
   */
  readonly killEveryMs: number;
  /** When (ms after the first enqueue) Redis is killed with SIGKILL and started again 500 ms later. */
  readonly redisKillsAtMs: readonly number[];
  /** How long the runs may take to end, in all. */
  readonly timeoutMs: number;
  readonly watchdogMs?: number;
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  readonly runs: number;
  readonly completed: number;
  readonly notEnded: number;
  readonly workerKills: number;
  readonly redisKills: number;
  readonly seconds: number;
  readonly events: number;
  readonly toolExecutions: number;
  readonly toolCalls: number;
  /** Every breach of the guarantees, one line each; empty when they all held. */
  readonly violations: readonly string[];
}

/**
 * Runs `runs` runs on real worker processes against a private, durable Redis (AOF, fsync per
 * write) while workers are SIGKILLed and Redis itself is killed and restarted, then checks what
 * must hold: every run ends (completed: its handlers never fail), no event is written twice, no
 * call with a recorded result runs again, and no call fails unless a handler failed.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? (() => undefined);
  const redis = await startPrivateRedis({ durable: true });
  // Workers die here far more often than in a fleet: a job may lose five workers before its call ends
  // `worker_lost` (the limit itself is tested on its own), so what is checked is nothing lost or doubled.
  const env = {
    REDIS_URL: redis.url,
    ARCFLOW_PREFIX: PREFIX,
    ARCFLOW_WATCHDOG_MS: String(options.watchdogMs ?? 10_000),
    ARCFLOW_MAX_STALLED_COUNT: '5',
    OPENAI_API_KEY: '',
    OPENAI_BASE_URL: '',
  };
  const fleet = new WorkerFleet(FIXTURE, env, log);
  const client = createClient({ redis: redis.url, prefix: PREFIX, redis_timeout_ms: 30_000 });
  let redisKills = 0;
  let stopping = false;
  const started = Date.now();
  try {
    await fleet.start(options.workers);
    const run_ids: string[] = [];
    for (let index = 0; index < options.runs; index += 50) {
      const batch = Array.from({ length: Math.min(50, options.runs - index) }, (_, offset) => client.enqueue({ agent: 'chaos_agent', input: `run ${index + offset}` }));
      run_ids.push(...(await Promise.all(batch)).map(({ run_id }) => run_id));
    }
    log(`enqueued ${run_ids.length} runs`);
    const enqueuedAt = Date.now();
    fleet.killEvery(options.killEveryMs);
    const redisKiller = (async () => {
      for (const at of options.redisKillsAtMs) {
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, enqueuedAt + at - Date.now())));
        if (stopping) break;
        await redis.kill();
        redisKills += 1;
        log('killed Redis');
        await new Promise((resolve) => setTimeout(resolve, 500));
        await redis.start();
        log('Redis is back');
      }
    })();
    const deadline = enqueuedAt + options.timeoutMs;
    const outcomes = await Promise.all(run_ids.map((run_id) => waitUntil(client, run_id, deadline)));
    stopping = true;
    await Promise.all([fleet.stopKilling(), redisKiller]);
    log('every run has an outcome; checking');
    return await check(client, redis.url, run_ids, outcomes, { workerKills: fleet.kills, redisKills, seconds: (Date.now() - started) / 1000 });
  } finally {
    stopping = true;
    fleet.killAll();
    await client.close();
    await redis.close();
  }
}

async function waitUntil(client: ArcflowClient, run_id: string, deadline: number): Promise<string> {
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return 'not ended';
    try {
      const run = await client.wait(run_id, { timeout_ms: Math.min(left, 30_000) });
      if (run.status === 'completed' || run.status === 'failed' || run.status === 'cancelled') return run.error ? `${run.status} (${run.error.error_code})` : run.status;
    } catch {
      // Redis away longer than the client's timeout: ask again.
    }
  }
}

async function check(
  client: ArcflowClient,
  url: string,
  run_ids: readonly string[],
  outcomes: readonly string[],
  figures: { workerKills: number; redisKills: number; seconds: number },
): Promise<ChaosReport> {
  const violations: string[] = [];
  let events = 0;
  let toolCalls = 0;
  for (const [index, run_id] of run_ids.entries()) {
    if (outcomes[index] !== 'completed') violations.push(`${run_id} ended ${outcomes[index]}`);
    const log: TraceEvent[] = [];
    for await (const event of client.events(run_id)) log.push(event);
    events += log.length;
    try {
      assertEventInvariants(log);
    } catch (error) {
      violations.push(`${run_id}: ${(error as Error).message}`);
    }
    const once = new Map<string, number>();
    for (const event of log) {
      const key = onceKey(event);
      if (key) once.set(key, (once.get(key) ?? 0) + 1);
      if (TOOL_TERMINAL_KINDS.has(event.kind)) toolCalls += 1;
      if (event.kind === 'ToolCallFailed') violations.push(`${run_id}: ${event.tool_call_id} failed (${event.error_code}) though no handler failed`);
    }
    for (const [key, count] of once) if (count > 1) violations.push(`${run_id}: ${key} written ${count} times`);
  }
  const redis = new Redis(url);
  try {
    const reruns = await redis.lrange(`{${PREFIX}}:chaos:reruns`, 0, -1);
    for (const call of reruns) violations.push(`${call} ran again after its result was recorded`);
    const toolExecutions = Number((await redis.get(`{${PREFIX}}:chaos:executions`)) ?? 0);
    return {
      runs: run_ids.length,
      completed: outcomes.filter((outcome) => outcome === 'completed').length,
      notEnded: outcomes.filter((outcome) => outcome === 'not ended').length,
      ...figures,
      events,
      toolExecutions,
      toolCalls,
      violations,
    };
  } finally {
    redis.disconnect();
  }
}

/** Events that happen once per occurrence, by what they are of; others may repeat (a new attempt). */
function onceKey(event: TraceEvent): string | undefined {
  const at = `${event.step_id}#${'iteration' in event ? event.iteration : ''}`;
  switch (event.kind) {
    case 'RunEnqueued':
    case 'AgentInvoked':
    case 'AgentResponseReceived':
      return `${event.kind} ${event.step_id}`;
    case 'ProviderResponseReceived':
    case 'TokensConsumed':
      return `${event.kind} ${at}`;
    case 'ToolCallStarted':
      return `${event.kind} ${at} ${event.tool_call_id} attempt ${event.attempt}`;
    default:
      return RUN_TERMINAL_KINDS.has(event.kind) ? 'run terminal event' : undefined;
  }
}
