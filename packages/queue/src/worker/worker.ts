import { randomUUID } from 'node:crypto';
import {
  type Agent,
  ConfigError,
  DEFAULT_MAX_STATE_BYTES,
  type ToolDefinition,
  type ToolLogger,
  Workflow,
  backoffMs,
  childAgentsOf,
  modelTargets,
  openToolSources,
  stepFailedEvent,
  stepRunError,
  toolDefinitionHash,
} from '@arcflow/core';
import { type Job, Worker } from 'bullmq';
import { connectRedis, duplicateRedis } from '../redis/connect.ts';
import { QueueName } from '../redis/keys.ts';
import { coalesceWrites } from '../redis/writes.ts';
import { closeRedis, redisRefusal, isConnectionError, outageOf, redactUrl, watchConnection } from '../redis/connection.ts';
import { type AgentRegistration, Registry } from '../records/registry.ts';
import { RunStore } from '../runs/run-store.ts';
import { ThreadStore } from '../threads/thread-store.ts';
import type { PartitionState } from '../redis/partition-map.ts';
import { CancellationListener } from '../runs/cancel.ts';
import { recordJobTaken } from '../metrics/job-start.ts';
import { type Succession, emitRunSpanOnce, endRun } from '../runs/end-run.ts';
import { type ProviderJobData, type ToolJobData, attemptsOf, finishedJobRetention } from '../jobs/jobs.ts';
import { inJobSpan } from '../tracing.ts';
import { WORKER_DEFAULTS, type WorkerOptions, resolveWorkerOptions } from '../config/options.ts';
import { ProviderJobProcessor } from '../loop/provider-job.ts';
import { ModelRouter } from '../loop/model-call.ts';
import { QueuePool } from '../loop/join.ts';
import { settleFailedToolJob, toolJobProcessor } from '../calls/tool-job.ts';
import { QUICK_LOSSES } from '../calls/tool-losses.ts';
import { timeOutWaitingCall } from '../calls/waiting/timeouts.ts';
import { isWaitTimeoutJob } from '../calls/waiting/waiting-call.ts';
import { ToolStepProcessor } from '../workflows/tool-step.ts';
import { Watchdog } from '../watchdog/watchdog.ts';
import { WorkflowDirectory, WorkflowScheduler, workflowRunOf } from '../workflows/workflow-scheduler.ts';
import { nearestName } from '../records/nearest-name.ts';
import { refusedConnection } from '../redis/tls-trust.ts';
import { nameModels, recordThroughGlobalProvider } from '@arcflow/telemetry/metrics';
import { definedModelNames } from '../metrics/model-names.ts';

/** How long a drain waits for Redis to come back before it stops without finishing. */
const DRAIN_WITHOUT_REDIS_MS = 10_000;

/** A running worker process's engine. */
export interface ArcflowWorker {
  readonly id: string;
  readonly agents: readonly string[];
  /** The queues it takes jobs from, by name (each in every partition it serves). */
  readonly queues: readonly string[];
  /**
   * Drains: stops taking jobs, lets in-flight jobs finish, then disconnects. Rejects, disconnected,
   * if Redis is away for 10 s meanwhile (the jobs in flight are then re-delivered elsewhere).
   */
  close(): Promise<void>;
}

/**
 * Starts the BullMQ workers for the given agents: one on the provider's queue (provider role),
 * one per tool queue (tools role). Tool `concurrency` becomes the tool queue's global
 * concurrency, so it caps executions across every worker.
 */
export async function startWorker(input: WorkerOptions): Promise<ArcflowWorker> {
  // Options are checked before any tool source starts; then each source (an MCP server) is listed
  // once, and kept open (one client per server) until the worker has drained.
  const { logger } = resolveWorkerOptions(input);
  const opened = await openToolSources(input.agents, { logger });
  try {
    const worker = await startEngine({ ...input, agents: opened.definitions });
    // An application that registered its own MeterProvider gets arcflow's metrics through it (SPEC §18).
    const stopRecording = await recordThroughGlobalProvider();
    return { ...worker, close: () => worker.close().finally(() => (stopRecording?.(), opened.close())) };
  } catch (error) {
    await opened.close();
    throw error;
  }
}

async function startEngine(input: WorkerOptions): Promise<ArcflowWorker> {
  const options = resolveWorkerOptions(input);
  const { agents, workflows } = collectDefinitions(input.agents);
  // Refuses, before connecting, an agent (or fallback) whose provider this worker lacks.
  const models = options.roles.includes('provider') ? new ModelRouter(options, { agents, workflows }) : undefined;
  // Metrics name a provider call's model only when a definition or provider names it (a model given per run adds no series).
  if (models) nameModels(definedModelNames(agents.values(), workflows.values(), options));
  const tools = collectTools(agents, workflows, options.tools);
  const id = input.worker_id ?? newWorkerId();
  // One connection for BullMQ and the store; each tick's commands go out in one socket write
  // (coalesceWrites). Measured against a second, auto-pipelining connection for the store: less
  // CPU, since ioredis's auto-pipelining costs more per command than a corked socket.
  const connection = coalesceWrites(connectRedis(options.redis, { maxRetriesPerRequest: null }));
  // A line when Redis goes away, again every while it stays away (with the address), and one when it is back: not an error per retry.
  watchConnection(connection, options.redis, options.logger, WORKER_DEFAULTS.redis_away_warn_ms);
  const logWorkerError = (message: string, fields: Record<string, unknown>) => (error: Error) => {
    if (!isConnectionError(error)) options.logger.error(message, { ...fields, error });
  };
  const store = new RunStore(connection, options.prefix, options.retention_seconds);
  // Partitions (SPEC §9): the map is created or grown to this worker's count; it serves every
  // partition there is, or those of them that serve_partitions names.
  const servedTags = (state: PartitionState) => store.partitions.tagsOf(state, options.serve_partitions);
  let tags: string[];
  // A refusal that retrying will not change (an untrusted certificate) fails the start, not a silent wait.
  const refusal = refusedConnection(connection, (error) => redisRefusal(error, options.redis));
  try {
    tags = servedTags(await Promise.race([store.partitions.ensure(options.partitions), refusal.refused]));
  } catch (error) {
    connection.disconnect();
    throw redisRefusal(error, options.redis) ?? error;
  } finally {
    refusal.stop();
  }
  if (options.serve_partitions) options.logger.info('serving some partitions only', { partitions: [...options.serve_partitions].sort((a, b) => a - b) });
  // A run cancelled by a process that does not trace still gets its root span (from one worker).
  const listener = duplicateRedis(connection);
  listener.on('error', () => undefined); // reported once, by the main connection's watch
  const cancellation = await CancellationListener.start(listener, store.keys.cancelChannel, (run_id) => {
    emitRunSpanOnce(store, run_id).catch((error) => options.logger.warn('root span for a cancelled run failed', { run_id, error }));
  });
  const registry = new Registry(connection, store.keys, WORKER_DEFAULTS.heartbeat_ttl_ms);
  const runtime = { store, cancellation, logger: options.logger };
  const queues = new QueuePool(connection, store.keys);
  const threads = new ThreadStore(connection, store.keys, options.prefix, store.partitions);
  const workers: Worker[] = [];
  const common = {
    connection,
    lockDuration: options.lock_duration_ms,
    stalledInterval: options.stalled_interval_ms,
    maxStalledCount: options.max_stalled_count,
    ...finishedJobRetention(options.retention_seconds),
  };
  const registrations = new Map<string, AgentRegistration>();

  const scheduler = new WorkflowScheduler({ store, queues, redis: connection, logger: options.logger });
  /** The BullMQ Workers of one partition's tag (capped tools' queues live under the prefix's tag only). */
  const serveTag: ((tag: string) => void)[] = [];
  /**
   * One concurrency budget per process, whatever the number of partitions: each partition's
   * Worker of a queue gets an even share of it (at least 1), and shares shrink as partitions grow.
   */
  const share = (budget: number) => Math.max(1, Math.ceil(budget / tags.length));
  const shared: { worker: Worker; budget: number }[] = [];
  const rebalance = () => {
    for (const { worker, budget } of shared) worker.concurrency = share(budget);
  };
  if (models) {
    const stepDeps = { ...runtime, agents, workflows, scheduler, options, queues, models, threads, redis: connection };
    const processor = new ProviderJobProcessor({ ...stepDeps, toolSteps: new ToolStepProcessor(stepDeps) });
    const onFailed = (job: Job<ProviderJobData> | undefined, error: Error | undefined) => {
      if (job && isWaitTimeoutJob(job.name)) return;
      void failStepIfFinal(stepDeps, job, error?.message);
    };
    // A provider queue also holds the delayed jobs that time waiting calls out.
    const processProviderQueueJob = async (job: Job<ProviderJobData>, span: Parameters<ProviderJobProcessor['process']>[1], token?: string) => {
      if (!isWaitTimeoutJob(job.name)) return processor.process(recordJobTaken(job.queueName, 'provider', job), span, token);
      return timeOutWaitingCall({ store, queues, logger: options.logger }, job);
    };
    // One provider queue per agent and per workflow: a worker only ever takes the jobs of what it
    // serves, so workers running different modules share a prefix, and a run whose agent has no
    // live worker waits in its queue.
    for (const definition of [...agents.values(), ...workflows.values()]) {
      const queueName = QueueName.agent(definition.name);
      serveTag.push((tag) => {
        const worker = new Worker<ProviderJobData>(queueName, (job, token) => inJobSpan(queueName, job, (span) => processProviderQueueJob(job, span, token)), {
          ...common,
          prefix: tag,
          concurrency: share(options.provider_concurrency),
          // A failed provider call delays its own job (see provider-failure.ts); this backoff is for
          // failures of the job itself (a Redis error), whose retries go to the same model.
          settings: { backoffStrategy: (attemptsMade: number) => backoffMs(attemptsMade, options.provider_backoff_ms, WORKER_DEFAULTS.provider_max_backoff_ms) },
        });
        worker.on('failed', onFailed);
        worker.on('error', logWorkerError('provider worker error', { agent: definition.name }));
        workers.push(worker);
        shared.push({ worker, budget: options.provider_concurrency });
      });
      registrations.set(definition.name, {
        provider_queue: queueName,
        tools: definition.tools.map((tool) => tool.name),
        tool_definitions: Object.fromEntries(definition.tools.map((tool) => [tool.name, toolDefinitionHash(tool)])),
        provider_attempts: options.provider_attempts,
        model_targets: modelTargetCounts(definition),
        definition_hash: definition.definition_hash,
        ...(definition instanceof Workflow ? { workflow: definition.graph } : {}),
        ...(definition instanceof Workflow || definition.max_state_bytes === DEFAULT_MAX_STATE_BYTES ? {} : { max_state_bytes: definition.max_state_bytes }),
      });
    }
  }

  if (options.roles.includes('tools')) {
    const toolDeps = {
      ...runtime,
      tools,
      queues,
      scheduler,
      workflows: new WorkflowDirectory(registry),
      redis: connection,
      provider_attempts: options.provider_attempts,
      max_stalled_count: options.max_stalled_count,
    };
    const process = toolJobProcessor(toolDeps);
    for (const tool of tools.values()) {
      // An external tool's calls never run on a worker (SPEC §20): it has no queue to serve.
      if (tool.external) continue;
      const queueName = QueueName.tool(tool.name, toolDefinitionHash(tool));
      const queue = queues.get(queueName);
      // A capped tool has one queue, under the prefix's tag, so its cap holds across partitions.
      if (tool.concurrency !== undefined) await queue.setGlobalConcurrency(tool.concurrency);
      else await queue.removeGlobalConcurrency();
      serveTag.push((tag) => {
        const capped = tool.concurrency !== undefined;
        if (capped && tag !== store.keys.tag) return;
        const budget = Math.min(options.tools_concurrency, tool.concurrency ?? Number.POSITIVE_INFINITY);
        const worker = new Worker<ToolJobData>(queueName, (job) => inJobSpan(queueName, recordJobTaken(queueName, 'tool', job), () => process(job)), {
          ...common,
          // The call's own budget counts losses past the grace (tool-losses.ts); BullMQ's limit caps quick ones too.
          maxStalledCount: options.max_stalled_count + QUICK_LOSSES,
          prefix: tag,
          concurrency: capped ? budget : share(budget),
        });
        if (!capped) shared.push({ worker, budget });
        worker.on('failed', (job, error) => {
          if (!job || !failedForGood(job, error?.message)) return;
          settleFailedToolJob(toolDeps, job, stalledOut(error?.message)).catch((failure) =>
            options.logger.error('settling a failed tool job failed', { job_id: job.id, error: failure }),
          );
        });
        worker.on('error', logWorkerError('tool worker error', { tool: tool.name }));
        workers.push(worker);
      });
    }
  }
  for (const tag of tags) for (const serve of serveTag) serve(tag);

  const watchdog = new Watchdog({ store, redis: connection, queues, threads, registry, scheduler, logger: options.logger, worker_id: id, watchdog_ms: options.watchdog_ms });
  // The tool definitions this worker runs calls of, by name: other live workers holding another one are named at start.
  const heldTools = new Map([...tools.values()].map((tool) => [tool.name, toolDefinitionHash(tool)]));
  await warnOfOtherDefinitions(registry, id, heldTools, options.logger);
  await registry.announce(id, registrations, options.serve_partitions, heldTools);
  watchdog.start();
  // Partitions another worker added are served from the next heartbeat on.
  const followPartitions = async () => {
    const now = servedTags(await store.partitions.read());
    const added = now.filter((tag) => !tags.includes(tag));
    if (added.length === 0) return;
    tags = now;
    for (const tag of added) for (const serve of serveTag) serve(tag);
    rebalance();
    options.logger.info('serving new partitions', { partitions: now.length - 1, added: added.length });
  };
  const heartbeat = setInterval(() => {
    registry.announce(id, registrations, options.serve_partitions, heldTools).catch((error) => options.logger.warn('heartbeat failed', { error }));
    followPartitions().catch((error) => options.logger.warn('reading the partition map failed', { error }));
  }, options.heartbeat_ms);
  heartbeat.unref();
  await Promise.all(workers.map((worker) => worker.waitUntilReady()));

  let closing: Promise<void> | undefined;
  return {
    id,
    agents: [...agents.keys(), ...workflows.keys()],
    // One name per queue, however many partitions it is served in.
    queues: [...new Set(workers.map((worker) => worker.name))],
    close: () => {
      closing ??= (async () => {
        clearInterval(heartbeat);
        const drained = (async () => {
          await watchdog.close();
          await registry.withdraw(id, registrations.keys(), heldTools).catch(() => undefined);
          await Promise.all(workers.map((worker) => worker.close()));
          await queues.close();
        })();
        // Without Redis a drain cannot finish (every job's completion is a write): after a while, stop.
        const outage = outageOf(connection, DRAIN_WITHOUT_REDIS_MS);
        try {
          const away = await Promise.race([drained.then(() => false), outage.away.then(() => true)]);
          if (away) {
            drained.catch(() => undefined);
            throw new Error(
              `Redis at ${redactUrl(options.redis)} has been unreachable for ${DRAIN_WITHOUT_REDIS_MS / 1000} s: stopped without draining; the jobs in flight go to other workers once their locks expire`,
            );
          }
        } finally {
          outage.stop();
          await cancellation.close();
          await closeRedis(connection);
        }
      })();
      return closing;
    },
  };
}

/**
 * Says (`warn`) which live workers on the prefix hold another definition of one of this worker's
 * tools' names: each definition has its own queue, so calls never cross, but a run's calls wait for a
 * worker of the definition it was planned with.
 */
async function warnOfOtherDefinitions(registry: Registry, worker_id: string, heldTools: ReadonlyMap<string, string>, logger: ToolLogger): Promise<void> {
  for (const clash of await registry.otherDefinitions(worker_id, heldTools)) {
    logger.warn(`another live worker on this prefix defines tool '${clash.tool_name}' differently: each definition's calls run only on workers holding it`, {
      tool: clash.tool_name,
      definition_hash: clash.definition_hash,
      other_workers: clash.others.map((other) => `${other.worker_id} (${other.definition_hash})`),
    });
  }
}

/** How many models each agent step may call (its own and its fallbacks), by step id: an agent's one step is `s1`. */
function modelTargetCounts(definition: Agent | Workflow): Record<string, number> {
  if (!(definition instanceof Workflow)) return { s1: modelTargets(definition, definition.settings).length };
  return Object.fromEntries(definition.steps.flatMap((step) => (step.type === 'agent' ? [[step.id, modelTargets(step.agent, step.agent.settings).length]] : [])));
}

/** A worker id: `worker_` and 8 hex characters. */
export function newWorkerId(): string {
  return `worker_${randomUUID().slice(0, 8)}`;
}

/** BullMQ will not try this job again: its attempts are spent, or it stalled too often. */
function failedForGood(job: Job, reason: string | undefined): boolean {
  return job.attemptsMade >= attemptsOf(job) || stalledOut(reason);
}

/** BullMQ failed the job because it lost its worker more often than `maxStalledCount` allows. */
function stalledOut(reason: string | undefined): boolean {
  return reason?.includes('stalled more than allowable limit') === true;
}

/**
 * A provider job that BullMQ failed for good fails its step: an agent run with it, a workflow
 * step on its own (the run moves on as its `on_step_failure` says).
 */
async function failStepIfFinal(
  deps: Succession & { store: RunStore; workflows: ReadonlyMap<string, Workflow>; scheduler: WorkflowScheduler; options: { provider_attempts: number } },
  job: Job<ProviderJobData> | undefined,
  reason: string | undefined,
): Promise<void> {
  if (!job || !failedForGood(job, reason)) return;
  const { run_id, step_id, iteration } = job.data;
  const error = stepRunError('job_failed', `provider job for iteration ${iteration} failed permanently`);
  const ending = { outcome: { status: 'failed' as const, error }, step_id, events: [{ event: stepFailedEvent(step_id, error) }] };
  try {
    const spec = await deps.store.getSpec(run_id);
    const workflow = spec ? deps.workflows.get(spec.agent) : undefined;
    if (!spec || !workflow) {
      await endRun(deps.store, run_id, ending, deps);
      return;
    }
    await deps.scheduler.settle(workflowRunOf(workflow, spec, deps.options.provider_attempts), ending);
  } catch {
    // The watchdog finds the run if this write was lost.
  }
}

/** Agents (with every workflow's agents) and workflows by name; one name means one definition. */
function collectDefinitions(definitions: WorkerOptions['agents']): { agents: Map<string, Agent>; workflows: Map<string, Workflow> } {
  const agents = new Map<string, Agent>();
  const workflows = new Map<string, Workflow>();
  const addAgent = (agent: Agent) => {
    const existing = agents.get(agent.name);
    if (existing && existing !== agent) throw new ConfigError(`two different agents are named '${agent.name}'`);
    agents.set(agent.name, agent);
  };
  for (const definition of definitions) {
    if (definition instanceof Workflow) {
      const existing = workflows.get(definition.name);
      if (existing && existing !== definition) throw new ConfigError(`two different workflows are named '${definition.name}'`);
      workflows.set(definition.name, definition);
      definition.agents.forEach(addAgent);
    } else addAgent(definition);
  }
  // The agents of agent tools are served too (SPEC §13), unless one of that name is given: the given one is served.
  for (const child of childAgentsOf(agents.values())) {
    if (agents.has(child.name) || workflows.has(child.name)) continue;
    if (child.tool_sources.length > 0) throw new ConfigError(`agent '${child.name}' (an agent tool's) lists tool sources: give it to the worker too, so its sources are opened`);
    agents.set(child.name, child);
  }
  for (const name of workflows.keys()) {
    if (agents.has(name)) throw new ConfigError(`'${name}' names both an agent and a workflow; agents and workflows share one namespace`);
  }
  if (agents.size === 0 && workflows.size === 0) throw new ConfigError('a worker needs at least one agent');
  return { agents, workflows };
}

/** Tool names are queue names, so one name must mean one definition across the served agents and tool steps. */
function collectTools(agents: ReadonlyMap<string, Agent>, workflows: ReadonlyMap<string, Workflow>, only: readonly string[] | undefined): Map<string, ToolDefinition> {
  const tools = new Map<string, ToolDefinition>();
  const all = [...[...agents.values()].flatMap((agent) => agent.tools), ...[...workflows.values()].flatMap((workflow) => workflow.tools)];
  for (const tool of all) {
    const existing = tools.get(tool.name);
    if (existing && existing !== tool) throw new ConfigError(`two different tools are named '${tool.name}' (a worker finds a call's tool by its name)`);
    tools.set(tool.name, tool);
  }
  if (only) {
    const unknown = only.filter((name) => !tools.has(name));
    if (unknown.length > 0) {
      const named = unknown.map((name) => {
        const nearest = nearestName(name, [...tools.keys()]);
        return nearest ? `${name} (did you mean '${nearest}'?)` : name;
      });
      throw new ConfigError(`--tools names tools no served agent has: ${named.join(', ')}`);
    }
    for (const name of [...tools.keys()]) if (!only.includes(name)) tools.delete(name);
  }
  return tools;
}
