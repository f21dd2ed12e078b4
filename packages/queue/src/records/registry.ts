import { type RunConfig, type WorkflowGraph, type WorkflowRunConfig, stepRunConfig } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { providerAttempts, stepTargets } from '../jobs/jobs.ts';
import { type Keys, QueueName } from '../redis/keys.ts';

/** What the registry knows of an agent (or workflow): where its provider jobs go and which tools it uses. */
export interface AgentRegistration {
  readonly provider_queue: string;
  readonly tools: readonly string[];
  /** Each tool's definition hash, by name: its jobs' queue is its definition's (`QueueName.tool`). */
  readonly tool_definitions?: Readonly<Record<string, string>>;
  /** Attempts per provider call (per model, when a step has fallbacks), as the serving workers are configured. */
  readonly provider_attempts: number;
  /**
   * How many models each agent step may call, its agent's own and its `model_fallbacks`, by step id
   * (an agent's one step is `s1`); a provider job gets `provider_attempts` times its step's count.
   * Absent in registrations from before fallbacks: one.
   */
  readonly model_targets?: Readonly<Record<string, number>>;
  /** The agent's definition hash in the worker that registered it last. */
  readonly definition_hash?: string;
  /** Set for a workflow: its graph, from which clients start its first steps and check requests. */
  readonly workflow?: WorkflowGraph;
  /** The agent's `max_state_bytes` (SPEC §17), when it is not the default: an initial state over it is refused at enqueue. */
  readonly max_state_bytes?: number;
}

/**
 * The attempts of a provider job of `step_id` in a run of this agent or workflow: the attempts
 * per model times the step's models, from the run's config when it lists `model_fallbacks` (pass
 * it where it is at hand), else as registered.
 */
export function registeredAttempts(registration: AgentRegistration, step_id: string, config?: unknown): number {
  const own = registration.workflow ? stepRunConfig((config ?? undefined) as WorkflowRunConfig | undefined, step_id) : ((config ?? undefined) as RunConfig | undefined);
  return providerAttempts(registration.provider_attempts, stepTargets(own, registration.model_targets?.[step_id]));
}

/**
 * Workers announce the agents they serve, with a heartbeat. Clients accept runs for any agent a
 * worker has registered (a run for an agent with no live worker waits in its queue) and refuse
 * the rest.
 */
export class Registry {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly heartbeatTtlMs: number,
  ) {}

  /**
   * Refreshes the worker's heartbeat for its agents, the tool definitions it holds (name → definition
   * hash), and the partitions it serves when it serves some only.
   */
  async announce(
    worker_id: string,
    agents: ReadonlyMap<string, AgentRegistration>,
    servedPartitions?: ReadonlySet<number>,
    heldTools: ReadonlyMap<string, string> = new Map(),
  ): Promise<void> {
    const now = Date.now();
    const pipeline = this.redis.multi();
    for (const [tool_name, definition_hash] of heldTools) {
      pipeline.zadd(this.keys.toolHolders(tool_name), now, `${worker_id}|${definition_hash}`);
      pipeline.zremrangebyscore(this.keys.toolHolders(tool_name), 0, now - 10 * this.heartbeatTtlMs);
    }
    if (servedPartitions) pipeline.set(this.keys.workerPartitions(worker_id), [...servedPartitions].join(','), 'PX', this.heartbeatTtlMs);
    for (const [name, registration] of agents) {
      pipeline.set(this.keys.agent(name), JSON.stringify(registration));
      pipeline.sadd(this.keys.agentNames, name);
      pipeline.zadd(this.keys.agentWorkers(name), now, worker_id);
      pipeline.zremrangebyscore(this.keys.agentWorkers(name), 0, now - 10 * this.heartbeatTtlMs);
    }
    pipeline.zadd(this.keys.workers, now, worker_id);
    // Workers that stopped without withdrawing (killed) leave their ids; keep the set bounded.
    pipeline.zremrangebyscore(this.keys.workers, 0, now - 10 * this.heartbeatTtlMs);
    await pipeline.exec();
  }

  async withdraw(worker_id: string, agentNames: Iterable<string>, heldTools: ReadonlyMap<string, string> = new Map()): Promise<void> {
    const pipeline = this.redis.multi();
    for (const [tool_name, definition_hash] of heldTools) pipeline.zrem(this.keys.toolHolders(tool_name), `${worker_id}|${definition_hash}`);
    for (const name of agentNames) pipeline.zrem(this.keys.agentWorkers(name), worker_id);
    pipeline.zrem(this.keys.workers, worker_id);
    pipeline.del(this.keys.workerPartitions(worker_id));
    await pipeline.exec();
  }

  /** The agent's registration, whether or not a worker serving it is alive now. */
  async registration(name: string): Promise<AgentRegistration | undefined> {
    const registration = await this.redis.get(this.keys.agent(name));
    return registration ? (JSON.parse(registration) as AgentRegistration) : undefined;
  }

  /** How many workers serving the agent sent a heartbeat within the heartbeat TTL. */
  async liveWorkers(name: string): Promise<number> {
    return this.redis.zcount(this.keys.agentWorkers(name), Date.now() - this.heartbeatTtlMs, '+inf');
  }

  /**
   * The partitions below `count` that none of the agent's live workers serves (some serve a subset:
   * ARCFLOW_SERVE_PARTITIONS); none when a live worker serves every partition, or when no worker
   * of the agent is alive at all.
   */
  async unservedPartitions(name: string, count: number): Promise<number[]> {
    const live = await this.redis.zrangebyscore(this.keys.agentWorkers(name), Date.now() - this.heartbeatTtlMs, '+inf');
    if (live.length === 0) return [];
    // One read for them all: the keys share the prefix's tag.
    const served = await this.redis.mget(live.map((worker_id) => this.keys.workerPartitions(worker_id)));
    if (served.some((list) => list === null)) return [];
    const covered = new Set(served.flatMap((list) => list!.split(',').map(Number)));
    return Array.from({ length: count }, (_, k) => k).filter((k) => !covered.has(k));
  }

  /**
   * The live workers (other than `worker_id`) that hold another definition of one of these tools'
   * names (name → definition hash), by tool name.
   */
  async otherDefinitions(worker_id: string, heldTools: ReadonlyMap<string, string>): Promise<ToolDefinitionClash[]> {
    const since = Date.now() - this.heartbeatTtlMs;
    const clashes: ToolDefinitionClash[] = [];
    for (const [tool_name, definition_hash] of heldTools) {
      const holders = await this.redis.zrangebyscore(this.keys.toolHolders(tool_name), since, '+inf');
      const others = holders.map((member) => member.split('|') as [string, string]).filter(([holder, hash]) => holder !== worker_id && hash !== definition_hash);
      if (others.length === 0) continue;
      clashes.push({ tool_name, definition_hash, others: others.map(([holder, hash]) => ({ worker_id: holder, definition_hash: hash })) });
    }
    return clashes;
  }

  /** Every queue of the registered agents, workflows and tool definitions, sorted. */
  async queueNames(): Promise<string[]> {
    const registrations = await Promise.all((await this.known()).map((name) => this.registration(name)));
    return [...new Set(registrations.flatMap((registration) => (registration ? registeredQueues(registration) : [])))].sort();
  }

  /** The names of every agent a worker has registered under this prefix, sorted. */
  async known(): Promise<string[]> {
    return (await this.redis.smembers(this.keys.agentNames)).sort();
  }
}

/** A tool name that live workers on the prefix define otherwise than this worker does. */
export interface ToolDefinitionClash {
  readonly tool_name: string;
  /** This worker's definition hash. */
  readonly definition_hash: string;
  readonly others: readonly { readonly worker_id: string; readonly definition_hash: string }[];
}

/** The queues a registration's jobs go to: its provider queue and its tools' (those whose definition it records). */
function registeredQueues(registration: AgentRegistration): string[] {
  const definitions = registration.tool_definitions ?? {};
  return [registration.provider_queue, ...registration.tools.flatMap((name) => (definitions[name] ? [QueueName.tool(name, definitions[name])] : []))];
}
