import { ConfigError, type ModelProvider } from '@arcflow/core';
import { type ArcflowWorker, type WorkerRole, newWorkerId, startWorker } from '@arcflow/queue';
import { startTelemetry } from '@arcflow/telemetry';
import { startWorkerMetrics } from './worker-metrics.ts';
import { readWorkerEnv } from './env.ts';
import { boundHeapGrowth } from './heap.ts';
import { loadModule } from './load-module.ts';
import { watchParent } from './parent-watch.ts';
import { workerLogger } from './log.ts';

/** How long a stop that comes while the worker is starting waits for the start before exiting. */
const STARTING_GRACE_MS = 2_000;

export interface WorkerProcessOptions {
  module: string;
  roles?: WorkerRole[];
  tools?: string[];
  concurrency?: number;
  /** `--metrics-port`: serve `GET /metrics` here (over `ARCFLOW_METRICS_PORT`). */
  metricsPort?: number;
}

/**
 * The worker process: loads the user's module, picks the provider (OpenAI settings in the
 * environment win; else the module's exported `provider`), starts the engine, and drains on
 * SIGTERM or SIGINT: in-flight jobs finish, then the process exits.
 */
export async function runWorkerProcess(options: WorkerProcessOptions): Promise<ArcflowWorker> {
  const env = readWorkerEnv();
  boundHeapGrowth(env.heapGrowingPercent);
  // Before the user's module, so spans it starts at load time are exported too.
  const telemetry = await startTelemetry(env.otel);
  const metrics = await startWorkerMetrics({ ...env.metrics, port: options.metricsPort ?? env.metrics.port }, env.otel.serviceName);
  // The OpenAI provider's module (and the `openai` SDK) only when the environment asks for it, and
  // before the user's module: a TypeScript module registers tsx, and what is imported after that
  // passes through its loader.
  const openai = env.openai ? await import('@arcflow/provider-openai') : undefined;
  const loaded = await loadModule(options.module);
  const roles = options.roles ?? ['provider', 'tools'];
  const provider: ModelProvider | undefined = openai && env.openai ? openai.openaiProvider({ ...env.openai, model: env.model }) : loaded.provider;
  // Given as the module gave them: `startWorker` refuses a value that is not one (null included), naming it.
  const { providers = {}, ...tenancy } = loaded.worker_options;
  checkDefaultProvider(loaded, roles, provider);
  const worker_id = newWorkerId();
  let worker: ArcflowWorker | undefined;
  let starting: Promise<ArcflowWorker> | undefined;
  stopOnSignals(worker_id, () => ({ worker, starting }), {
    startedByPackageRunner: env.startedByPackageRunner,
    shutdown: () => Promise.all([telemetry.shutdown(), metrics.shutdown()]),
  });
  starting = startWorker({
    worker_id,
    logger: workerLogger(worker_id),
    agents: loaded.definitions,
    provider,
    providers,
    ...tenancy,
    roles,
    tools: options.tools,
    concurrency: options.concurrency ? { provider: options.concurrency, tools: options.concurrency } : undefined,
    redis: env.redis,
    prefix: env.prefix,
    default_model: env.model,
    watchdog_ms: env.watchdogMs,
    max_stalled_count: env.maxStalledCount,
    ...(env.partitions !== undefined ? { partitions: env.partitions } : {}),
    ...(env.servePartitions !== undefined ? { serve_partitions: env.servePartitions } : {}),
  });
  worker = await starting;
  metrics.observe({ redis: env.redis, prefix: env.prefix, queues: worker.queues });
  process.stdout.write(
    `arcflow worker ${worker.id} ready: agents=${worker.agents.join(',')} queues=${worker.queues.join(',')} provider=${provider?.id ?? '-'}${Object.keys(providers).length > 0 ? ` providers=${Object.keys(providers).join(',')}` : ''} tracing=${telemetry.enabled ? 'on' : 'off'} metrics=${metrics.describe()}\n`,
  );
  return worker;
}

/** Refuses a provider role with no default provider when an agent names none (those that do use the module's named ones, checked at start). */
function checkDefaultProvider(loaded: Awaited<ReturnType<typeof loadModule>>, roles: readonly WorkerRole[], provider: ModelProvider | undefined): void {
  const agents = loaded.definitions.flatMap((definition) =>
    definition.kind === 'agent' ? [definition] : definition.steps.flatMap((step) => (step.type === 'agent' ? [step.agent] : [])),
  );
  const needsDefault = agents.some((agent) => agent.provider === undefined);
  if (roles.includes('provider') && !provider && needsDefault) {
    throw new ConfigError('no model provider: set OPENAI_API_KEY or OPENAI_BASE_URL, or export `provider` from the module');
  }
}

/**
 * Drains and exits on SIGTERM or SIGINT (a second one exits at once), when the parent that
 * started it over IPC is gone, and when the package runner that started it has exited. A stop
 * while the worker is still starting drains what it has started, unless it is still waiting (for
 * Redis, say) and so holds nothing.
 */
function stopOnSignals(
  worker_id: string,
  current: () => { readonly worker: ArcflowWorker | undefined; readonly starting: Promise<ArcflowWorker> | undefined },
  options: { readonly startedByPackageRunner: boolean; readonly shutdown: () => Promise<unknown> },
): void {
  let stopping = false;
  const exit = (code: number) => void options.shutdown().finally(() => process.exit(code));
  const drain = (running: ArcflowWorker) =>
    // Drain first, so in-flight jobs end their spans; then flush the spans.
    running.close().then(
      () => exit(0),
      (error) => {
        process.stderr.write(`arcflow worker ${worker_id}: error while draining: ${(error as Error).message}\n`);
        exit(1);
      },
    );
  const stop = (signal: string) => {
    if (stopping) {
      process.stderr.write(`arcflow worker ${worker_id}: ${signal} again, exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    process.stderr.write(`arcflow worker ${worker_id}: ${signal}, draining in-flight jobs\n`);
    const { worker, starting } = current();
    if (worker) return void drain(worker);
    // Still starting: drain what it has started, unless it is still waiting (for Redis, say) and so holds nothing.
    const waiting = new Promise<void>((resolve) => setTimeout(resolve, STARTING_GRACE_MS).unref());
    void Promise.race([starting?.then(drain, () => exit(0)), waiting.then(() => exit(0))]);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // Started by another process with an IPC channel (`spawnWorker`): when that process is gone, drain and exit.
  if (process.channel) {
    process.channel.unref();
    process.on('disconnect', () => stop('parent process gone'));
  }
  // Started by a package runner (`npx arcflow worker`): when the runner has exited, drain and exit too.
  // (Not otherwise: a worker started with `nohup … &` or `setsid` is meant to outlive its shell.)
  if (options.startedByPackageRunner) watchParent(() => stop('parent process gone'));
}

export { spawnWorker, ARCFLOW_BIN, type WorkerProcess } from './spawn.ts';
export { metricsPort } from './env.ts';
