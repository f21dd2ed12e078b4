import { randomUUID } from 'node:crypto';
import { openToolSources, toolDefinitionHash } from '@arcflow/core';
import { nameModels, nameTenants, recordThroughGlobalProvider } from '@arcflow/telemetry/metrics';
import { connectRedis, duplicateRedis } from '../redis/connect.ts';
import { coalesceWrites } from '../redis/writes.ts';
import { isConnectionError, watchConnection } from '../redis/connection.ts';
import { type AgentRegistration, Registry } from '../records/registry.ts';
import { RunStore } from '../runs/run-store.ts';
import { ThreadStore } from '../threads/thread-store.ts';
import { CancellationListener } from '../runs/cancel.ts';
import { emitRunSpanOnce } from '../runs/end-run.ts';
import { finishedJobRetention } from '../jobs/jobs.ts';
import { WORKER_DEFAULTS, type WorkerOptions, resolveWorkerOptions } from '../config/options.ts';
import { openMetricsReader } from '../metrics/metrics-reader.ts';
import { ModelRouter, checkProvidersHeld, sharedProviderIds } from '../loop/model-router.ts';
import { Dispatcher } from '../jobs/dispatcher.ts';
import { Watchdog } from '../watchdog/watchdog.ts';
import { DeadWorkers } from '../watchdog/dead-workers.ts';
import { QUICK_LOSSES } from '../calls/tool-losses.ts';
import { WorkflowDirectory, WorkflowScheduler } from '../workflows/workflow-scheduler.ts';
import { definedModelNames } from '../metrics/model-names.ts';
import { namedTenants } from '../tenancy/options.ts';
import { collectDefinitions, collectTools, warnOfOtherDefinitions } from './definitions.ts';
import { PartitionServing, type Serving } from './partition-serving.ts';
import { serveProviderQueues } from './provider-workers.ts';
import { serveToolQueues } from './tool-workers.ts';
import { drainOnce } from './drain.ts';

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
  const options = resolveWorkerOptions(input);
  // Refuses, before any tool source starts or Redis is reached, an agent (or fallback) whose provider this worker lacks.
  if (options.roles.includes('provider')) {
    checkProvidersHeld(options, collectDefinitions(input.agents).agents.values());
    for (const { id, names } of sharedProviderIds(options)) {
      options.logger.warn(
        `providers ${names.map((name) => `'${name}'`).join(' and ')} share the id '${id}': a 429 from one pauses them all, and their events cannot be told apart; give each its own id (openaiProvider({ id }))`,
        { provider_id: id },
      );
    }
  }
  const opened = await openToolSources(input.agents, { logger: options.logger });
  try {
    const worker = await startEngine({ ...input, agents: opened.definitions });
    // An application that registered its own MeterProvider gets arcflow's metrics through it (SPEC §18),
    // the gauges of this worker's queues included (on a connection of their own, opened only then).
    const stopRecording = await recordThroughGlobalProvider(() => openMetricsReader({ redis: options.redis, prefix: options.prefix, queues: worker.queues }));
    return { ...worker, close: () => worker.close().finally(async () => (await stopRecording?.(), await opened.close())) };
  } catch (error) {
    await opened.close();
    throw error;
  }
}

/** A worker id: `worker_` and 8 hex characters. */
export function newWorkerId(): string {
  return `worker_${randomUUID().slice(0, 8)}`;
}

async function startEngine(input: WorkerOptions): Promise<ArcflowWorker> {
  const options = resolveWorkerOptions(input);
  const { agents, workflows } = collectDefinitions(input.agents);
  const models = options.roles.includes('provider') ? new ModelRouter(options) : undefined;
  // Metrics name a provider call's model only when a definition or provider names it (a model given per run adds no series).
  if (models) nameModels(definedModelNames(agents.values(), workflows.values(), options));
  // and a run's tenant only when a tenant option names it (SPEC §18): the rest are `_OTHER`.
  nameTenants(namedTenants(options.tenancy));
  const tools = collectTools(agents, workflows, options.tools);
  const id = input.worker_id ?? newWorkerId();
  // One connection for BullMQ and the store; each tick's commands go out in one socket write
  // (coalesceWrites). Measured against a second, auto-pipelining connection for the store: less
  // CPU, since ioredis's auto-pipelining costs more per command than a corked socket.
  const connection = coalesceWrites(connectRedis(options.redis, { maxRetriesPerRequest: null }));
  // A line when Redis goes away, again every while it stays away (with the address), and one when it is back: not an error per retry.
  watchConnection(connection, options.redis, options.logger, WORKER_DEFAULTS.redis_away_warn_ms);
  const store = new RunStore(connection, options.prefix, options.retention_seconds);
  const partitions = await PartitionServing.start(store.partitions, connection, options, id);
  // A run cancelled by a process that does not trace still gets its root span (from one worker).
  const listener = duplicateRedis(connection);
  listener.on('error', () => undefined); // reported once, by the main connection's watch
  const queues = new Dispatcher(connection, store.keys);
  const [cancellation] = await Promise.all([
    CancellationListener.start(listener, store.keys.cancelChannel, (run_id) => {
      emitRunSpanOnce(store, run_id).catch((error) => options.logger.warn('root span for a cancelled run failed', { run_id, error }));
    }),
    // What every process of the prefix schedules tenants by (SPEC §14), the clients' adds included.
    queues.tenants.publish(options.tenancy),
  ]);
  const registry = new Registry(connection, store.keys, WORKER_DEFAULTS.heartbeat_ttl_ms);
  const runtime = { store, cancellation, logger: options.logger };
  const threads = new ThreadStore(connection, store.keys, options.prefix, store.partitions);
  const scheduler = new WorkflowScheduler({ store, queues, redis: connection, logger: options.logger });
  const serving: Serving = {
    partitions,
    common: {
      connection,
      name: id,
      lockDuration: options.lock_duration_ms,
      stalledInterval: options.stalled_interval_ms,
      // Losses the fleet's own crashes cause land on jobs that did nothing wrong: BullMQ's limit is the
      // budget plus QUICK_LOSSES (a tool call's own budget counts only its slow losses, tool-losses.ts).
      maxStalledCount: options.max_stalled_count + QUICK_LOSSES,
      ...finishedJobRetention(options.retention_seconds),
    },
    logWorkerError: (message, fields) => (error) => {
      if (!isConnectionError(error)) options.logger.error(message, { ...fields, error });
    },
  };
  const registrations = models
    ? serveProviderQueues(serving, { ...runtime, agents, workflows, scheduler, options, queues, models, threads, redis: connection })
    : new Map<string, AgentRegistration>();
  if (options.roles.includes('tools')) {
    const { provider_attempts, max_stalled_count } = options;
    const toolDeps = { ...runtime, tools, queues, scheduler, workflows: new WorkflowDirectory(registry), redis: connection, provider_attempts, max_stalled_count };
    await serveToolQueues(serving, toolDeps, options, store.keys.tag);
  }
  partitions.startAll();
  // A dead worker process's jobs back in their queues at once, not when their locks expire.
  const deadWorkers = new DeadWorkers({ redis: connection, owner: id, workers: () => partitions.workers, logger: options.logger });
  deadWorkers.start();

  const watchdog = new Watchdog({ store, redis: connection, queues, threads, registry, scheduler, logger: options.logger, worker_id: id, watchdog_ms: options.watchdog_ms });
  // The tool definitions this worker runs calls of, by name: other live workers holding another one are named at start.
  const heldTools = new Map([...tools.values()].map((tool) => [tool.name, toolDefinitionHash(tool)]));
  const { workers } = partitions;
  // One round trip: the other workers' definitions read, this one announced, each BullMQ Worker's connection ready.
  await Promise.all([
    warnOfOtherDefinitions(registry, id, heldTools, options.logger),
    registry.announce(id, registrations, options.serve_partitions, heldTools),
    ...workers.map((worker) => worker.waitUntilReady()),
  ]);
  watchdog.start();
  const heartbeat = setInterval(() => {
    registry.announce(id, registrations, options.serve_partitions, heldTools).catch((error) => options.logger.warn('heartbeat failed', { error }));
    partitions.follow().catch((error) => options.logger.warn('reading the partition map failed', { error }));
  }, options.heartbeat_ms);
  heartbeat.unref();
  return {
    id,
    agents: [...agents.keys(), ...workflows.keys()],
    // One name per queue, however many partitions it is served in.
    queues: [...new Set(workers.map((worker) => worker.name))],
    close: drainOnce({ id, redis: options.redis, connection, heartbeat, watchdog, deadWorkers, registry, registrations, heldTools, workers, queues, cancellation }),
  };
}
