import { type Agent, DEFAULT_MAX_STATE_BYTES, Workflow, backoffMs, modelTargets, toolDefinitionHash } from '@arcflow/core';
import type { Span } from '@opentelemetry/api';
import { type Job, Worker } from 'bullmq';
import { QueueName } from '../redis/keys.ts';
import type { AgentRegistration } from '../records/registry.ts';
import { recordJobTaken } from '../metrics/job-start.ts';
import { type ProviderJobData, malformedProviderJobData } from '../jobs/jobs.ts';
import { inJobSpan } from '../tracing.ts';
import { WORKER_DEFAULTS } from '../config/options.ts';
import { type ProviderJobDeps, ProviderJobProcessor } from '../loop/provider-job.ts';
import { timeOutWaitingCall } from '../calls/waiting/timeouts.ts';
import { isWaitTimeoutJob } from '../calls/waiting/waiting-call.ts';
import { ToolStepProcessor } from '../workflows/tool-step.ts';
import { failStepIfFinal } from './failed-jobs.ts';
import type { Serving } from './partition-serving.ts';

/**
 * Serves one provider queue per agent and per workflow: a worker only ever takes the jobs of what
 * it serves, so workers running different modules share a prefix, and a run whose agent has no
 * live worker waits in its queue. Returns what the registry is told of each.
 */
export function serveProviderQueues(serving: Serving, deps: Omit<ProviderJobDeps, 'toolSteps'>): Map<string, AgentRegistration> {
  const { options } = deps;
  const processor = new ProviderJobProcessor({ ...deps, toolSteps: new ToolStepProcessor(deps) });
  const onFailed = (job: Job<ProviderJobData> | undefined, error: Error | undefined) => {
    if (job && isWaitTimeoutJob(job.name)) return;
    failStepIfFinal(deps, job, error?.message).catch((failure) => deps.logger.error('failing the step of a failed provider job failed', { job_id: job?.id, error: failure }));
  };
  const tenantOf = (run_id: string) => deps.queues.fair.ownerOf(run_id);
  // A provider queue also holds the delayed jobs that time waiting calls out.
  // A job whose data this engine did not write (another process's, or a corrupt one) is refused, changing nothing.
  const malformed = (job: Job<ProviderJobData>) => {
    const problem = isWaitTimeoutJob(job.name) ? undefined : malformedProviderJobData(job.data);
    if (problem) deps.logger.error('provider job refused: its data is malformed', { job_id: job.id, queue: job.queueName, field: problem });
    return problem !== undefined;
  };
  const processJob = async (job: Job<ProviderJobData>, span: Span, token?: string) => {
    if (!isWaitTimeoutJob(job.name)) return processor.process(recordJobTaken(job.queueName, 'provider', job, tenantOf), span, token);
    return timeOutWaitingCall({ store: deps.store, queues: deps.queues, logger: deps.logger }, job);
  };
  const registrations = new Map<string, AgentRegistration>();
  for (const definition of [...deps.agents.values(), ...deps.workflows.values()]) {
    const queueName = QueueName.agent(definition.name);
    serving.partitions.serve((tag) => {
      const worker = new Worker<ProviderJobData>(
        queueName,
        async (job, token) => (malformed(job) ? 'malformed' : inJobSpan(queueName, job, (span) => processJob(job, span, token))),
        {
          ...serving.common,
          prefix: tag,
          concurrency: serving.partitions.share(options.provider_concurrency),
          // A failed provider call delays its own job (see provider-failure.ts); this backoff is for
          // failures of the job itself (a Redis error), whose retries go to the same model.
          settings: { backoffStrategy: (attemptsMade: number) => backoffMs(attemptsMade, options.provider_backoff_ms, WORKER_DEFAULTS.provider_max_backoff_ms) },
        },
      );
      worker.on('failed', onFailed);
      worker.on('error', serving.logWorkerError('provider worker error', { agent: definition.name }));
      serving.partitions.add(worker);
      serving.partitions.shareOf(worker, options.provider_concurrency);
    });
    registrations.set(definition.name, registrationOf(definition, options.provider_attempts));
  }
  return registrations;
}

/** What the registry is told of an agent or workflow this worker serves. */
function registrationOf(definition: Agent | Workflow, provider_attempts: number): AgentRegistration {
  return {
    provider_queue: QueueName.agent(definition.name),
    tools: definition.tools.map((tool) => tool.name),
    tool_definitions: Object.fromEntries(definition.tools.map((tool) => [tool.name, toolDefinitionHash(tool)])),
    provider_attempts,
    model_targets: modelTargetCounts(definition),
    definition_hash: definition.definition_hash,
    ...(definition instanceof Workflow ? { workflow: definition.graph } : {}),
    ...(definition instanceof Workflow || definition.max_state_bytes === DEFAULT_MAX_STATE_BYTES ? {} : { max_state_bytes: definition.max_state_bytes }),
  };
}

/** How many models each agent step may call (its own and its fallbacks), by step id: an agent's one step is `s1`. */
function modelTargetCounts(definition: Agent | Workflow): Record<string, number> {
  if (!(definition instanceof Workflow)) return { s1: modelTargets(definition, definition.settings).length };
  return Object.fromEntries(definition.steps.flatMap((step) => (step.type === 'agent' ? [[step.id, modelTargets(step.agent, step.agent.settings).length]] : [])));
}
