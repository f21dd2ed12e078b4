import { randomInt } from 'node:crypto';
import {
  ConfigError,
  DEFAULT_MAX_STATE_BYTES,
  checkInitialState,
  type ApprovalAnswer,
  type ApprovalResolution,
  type ToolResultAnswer,
  type ToolResultInput,
  RequestError,
  type WorkflowGraph,
  checkRunConfig,
  checkToolChoice,
  checkWorkflowConfig,
  checkWorkflowInput,
  checkWorkflowExecConfig,
  checkExecConfig,
  checkExecSteps,
  inputMessages,
  newRunId,
  rootSteps,
  stepStartedEvent,
  workflowEnqueuedEvent,
} from '@arcflow/core';
import { resolveApproval } from '../calls/waiting/approvals.ts';
import { answerToolResult } from '../calls/waiting/tool-results.ts';
import { Dispatcher, type ToolQueueOf } from '../jobs/dispatcher.ts';
import { stepCarrier } from '../workflows/workflow-scheduler.ts';
import type { JoinTarget, ProviderJobData } from '../jobs/jobs.ts';
import { startNextOnThread } from '../threads/thread-run.ts';
import { nearestName } from '../records/nearest-name.ts';
import { unknownRun } from '../runs/unknown-run.ts';
import { type ForkPlan, type ForkRequest, planFork, retryPoint } from '../runs/fork.ts';
import { checkIdempotentRepeat, idempotentRequestHash } from './idempotency.ts';
import { partitionOfKey, partitionedRunId } from '../redis/partitions.ts';
import { type AgentRegistration, registeredAttempts } from '../records/registry.ts';
import type { InitialSteps } from '../runs/records.ts';
import type { ThreadJobSpec } from '../threads/thread-store.ts';
import { type RunTrace, firstJobCarrier, mintRunTrace } from '../tracing.ts';
import { type QueueInfo, queueInfos } from './queue-infos.ts';
import type { ClientContext } from './context.ts';
import type { EnqueueRequest } from './enqueue-request.ts';

/**
 * The client's operations on BullMQ's queues: enqueue (adds a run's first jobs), queue depths,
 * approvals (add the approved call's job), and removing a cancelled call's job. `client.ts` loads
 * this module on the first call that needs it, so a client that only reads runs never loads
 * BullMQ, the OpenTelemetry API or msgpack (a process loads what it uses). Its queues are one
 * pool, opened on first use and closed with the client.
 */
export class ClientJobs {
  private readonly queues: Dispatcher;

  constructor(private readonly context: ClientContext) {
    // A lost connection surfaces as the call's redis_unavailable.
    this.queues = new Dispatcher(context.redis, context.store.keys);
  }

  /**
   * Creates the run (once per idempotency key) and adds its first jobs; the request's fields are
   * checked by the client. A fork (SPEC §15) is created with what it copies, in its source's partition.
   */
  enqueue(request: EnqueueRequest, fork?: Pick<ForkPlan, 'copy' | 'partition'>): Promise<{ run_id: string; created: boolean }> {
    const { store, reach } = this.context;
    // Minted once per call (in the partition the map says): every retry below creates this same run, or finds it created.
    let minted: string | undefined;
    // One trace per run, minted here; linked to the caller's active span (e.g. its HTTP request).
    const trace = mintRunTrace();
    return reach(async () => {
      minted ??= fork ? (fork.partition === undefined ? newRunId() : partitionedRunId(fork.partition)) : await this.mintRunId(request.idempotency_key, request.thread_id);
      const registration = await this.registered(request.agent);
      const graph = checkAgainstRegistration(request, registration);
      const state = checkInitialState(request.state, registration.max_state_bytes ?? DEFAULT_MAX_STATE_BYTES);
      // A workflow fork starts the steps it runs again whose dependencies it keeps (SPEC §15).
      const roots = fork?.copy.workflow?.start ?? (graph ? rootSteps(graph) : []);
      // A key first used when the partitions were fewer is found where it was used.
      const earlier = request.idempotency_key === undefined ? undefined : await store.findIdempotent(request.idempotency_key);
      // A new run counts against its tenant's runs_per_minute (SPEC §14); a repeat of a key does not.
      if (!earlier) await this.queues.limits.countEnqueue(request.tenant);
      const run_id = earlier ?? (await this.createRun(minted, request, { registration, graph, roots, state, trace, fork }));
      const created = run_id === minted;
      // Its first jobs take their place among the tenants without reading the record back.
      if (created) this.queues.fair.remember(run_id, request);
      if (!created && request.idempotency_key !== undefined) checkIdempotentRepeat(request.idempotency_key, run_id, await store.requestHash(run_id), request);
      await this.startRun(run_id, created, request, { registration, graph, roots, trace });
      return { run_id, created };
    });
  }

  /** An agent's (or workflow's) registration; `unknown_agent` naming the nearest known one when none has registered it. */
  private async registered(agent: string): Promise<AgentRegistration> {
    const { registry, lookup, prefix } = this.context;
    const registration = await lookup(agent);
    if (registration) return registration;
    const known = await registry.known();
    const nearest = nearestName(agent, known);
    throw new RequestError(
      'unknown_agent',
      `unknown agent '${agent}'${nearest ? ` (did you mean '${nearest}'?)` : ''}: no worker has registered it under prefix '${prefix}' (known: ${known.length > 0 ? known.join(', ') : 'none'}; start a worker with \`arcflow worker --module <file>\`)`,
    );
  }

  /** Creates the run's record (once per idempotency key: the run of an earlier use when it has one). */
  private async createRun(
    run_id: string,
    request: EnqueueRequest,
    plan: RunPlan & { readonly state: ReturnType<typeof checkInitialState>; readonly fork: Pick<ForkPlan, 'copy'> | undefined },
  ): Promise<string> {
    const { registration, graph, roots, state, trace, fork } = plan;
    const request_hash = request.idempotency_key === undefined ? undefined : idempotentRequestHash(request);
    const created = await this.context.store.createRun(
      {
        run_id,
        agent: request.agent,
        input: request.input,
        config: request.config,
        exec_config: request.exec_config,
        trace,
        definition_hash: registration.definition_hash ?? '',
        ...(request.stream !== undefined ? { stream: request.stream } : {}),
        ...(request.enqueued_by !== undefined ? { enqueued_by: request.enqueued_by } : {}),
        ...(request.tenant !== undefined ? { tenant: request.tenant } : {}),
        ...(request.priority !== undefined ? { priority: request.priority } : {}),
      },
      request.idempotency_key,
      graph ? workflowEnqueuedEvent(graph) : { kind: 'RunEnqueued', step_id: 's1', agent: request.agent },
      graph
        ? initialSteps(
            graph,
            roots,
            fork?.copy.workflow?.kept.map(([id]) => id),
          )
        : undefined,
      state,
      request_hash,
      fork?.copy,
    );
    return created.run_id;
  }

  /**
   * Adds a run's first jobs: on a repeat too, a first enqueue that died between record and job is
   * completed here (the job id dedupes). A thread run joins its thread first (SPEC §11): steered,
   * or waiting in its thread's line, it gets no job (the end of the run before it adds its first).
   */
  private async startRun(run_id: string, created: boolean, request: EnqueueRequest, plan: RunPlan): Promise<void> {
    const { registration, graph, roots, trace } = plan;
    const spec = created ? undefined : await this.context.store.getSpec(run_id);
    if (!created && spec?.status !== 'queued') return;
    // Each model a step may call (its agent's and the fallbacks) gets the registered attempts.
    const target = (step_id: string) => ({ queue: registration.provider_queue, attempts: registeredAttempts(registration, step_id, request.config) });
    // On its thread before any job: the thread's one active run decides whether it starts now (SPEC §11).
    const join = request.thread_id === undefined ? undefined : await this.joinThread(run_id, request, target('s1'));
    if (join === 'steered' || join === 'wait') return;
    const runTrace = spec?.trace.traceparent ? (spec.trace as RunTrace) : trace;
    if (graph) {
      const steps = graph.steps.filter((step) => roots.includes(step.id));
      await Promise.all(steps.map((step) => this.queues.startStep(target(step.id), { run_id, step_id: step.id, iteration: 1, trace: stepCarrier(runTrace, step) })));
    } else {
      await this.queues.startStep(target('s1'), { run_id, step_id: 's1', iteration: 1, trace: firstJobCarrier(runTrace) });
    }
  }

  /**
   * Forks a run (SPEC §15): `{ run_id }` of the new run (with `thread_id` when it branched its
   * source's thread); `created` false for a retry of a run retried before (its retry's id).
   */
  async fork(run_id: string, request: ForkRequest, retry = false): Promise<{ run_id: string; thread_id?: string; created: boolean }> {
    const { reach } = this.context;
    const plan = await reach(() => planFork(this.context, run_id, request, retry));
    const { run_id: forked, created } = await this.enqueue(
      {
        agent: plan.agent,
        input: plan.input,
        ...(plan.config != null ? { config: plan.config } : {}),
        ...(plan.exec_config != null ? { exec_config: plan.exec_config } : {}),
        state: plan.state,
        ...(plan.stream !== undefined ? { stream: plan.stream } : {}),
        ...(plan.thread_id !== undefined ? { thread_id: plan.thread_id, on_busy: 'queue' as const } : {}),
        ...(plan.tenant !== undefined ? { tenant: plan.tenant } : {}),
        ...(plan.priority !== undefined ? { priority: plan.priority } : {}),
      },
      plan,
    );
    const thread_id = created ? plan.thread_id : await reach(() => this.context.store.threadOf(forked));
    return { run_id: forked, ...(thread_id !== undefined ? { thread_id } : {}), created };
  }

  /** Retries a failed or cancelled run (SPEC §15): a fork from the iteration it stopped at, once per run. */
  async retry(run_id: string): Promise<{ run_id: string; thread_id?: string; created: boolean }> {
    // Retried before: that retry, as it is, with no new run counted against the tenant's minute.
    const earlier = await this.retryOf(run_id);
    if (earlier) return earlier;
    const request = await this.context.reach(() => retryPoint(this.context, run_id));
    try {
      return await this.fork(run_id, request, true);
    } catch (error) {
      // Refused while another retry of it, made at the same time, took the minute's last run: that
      // one is the answer once it is created (it is being created now, or there is none).
      if (!(error instanceof RequestError) || error.code !== 'tenant_rate_limited') throw error;
      for (let tries = 0; tries < 10; tries += 1) {
        const concurrent = await this.retryOf(run_id);
        if (concurrent) return concurrent;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw error;
    }
  }

  /** The retry made of a run, if one was. */
  private async retryOf(run_id: string): Promise<{ run_id: string; thread_id?: string; created: false } | undefined> {
    const { reach, store } = this.context;
    const retry = (await reach(() => store.getRun(run_id)))?.retried_by;
    if (retry === undefined) return undefined;
    const thread_id = await reach(() => store.threadOf(retry));
    return { run_id: retry, ...(thread_id !== undefined ? { thread_id } : {}), created: false };
  }

  /**
   * Puts a created run on its thread: `start` (the thread was free), `wait` (queued behind its
   * active run) or `steered` (its input given to the active run; it has ended, completed). A run
   * refused as `thread_busy` (`on_busy: reject`) was removed again: nothing is queued.
   */
  private async joinThread(run_id: string, request: EnqueueRequest, job: ThreadJobSpec): Promise<'start' | 'wait' | 'steered'> {
    const { store, threads } = this.context;
    // The trace of the run that would take steered messages its target ends without (see `finish.lua`).
    const followUpTrace = request.on_busy === 'steer' ? JSON.stringify(mintRunTrace()) : undefined;
    const { decision, active } = await threads.join(
      run_id,
      request.thread_id!,
      request.on_busy ?? 'queue',
      inputMessages(request.input),
      store.retentionSeconds,
      job,
      followUpTrace,
    );
    if (decision === 'busy') throw new RequestError('thread_busy', `thread '${request.thread_id}' is busy: run '${active}' is active (on_busy: reject)`);
    return decision;
  }

  /** Every queue of the registered agents, workflows and tools: its depth and live workers. */
  queueInfos(): Promise<QueueInfo[]> {
    return queueInfos(this.context, this.queues);
  }

  /** Answers a call waiting for approval; the arguments are checked by the client. */
  approve(run_id: string, tool_call_id: string, answer: ApprovalAnswer): Promise<ApprovalResolution> {
    const { store, reach, prefix } = this.context;
    const { approved, reason, by } = answer;
    return reach(async () => {
      const status = await store.status(run_id);
      if (!status) throw unknownRun(run_id, prefix);
      const outcome = await resolveApproval({ store, queues: this.queues }, run_id, tool_call_id, {
        approved,
        ...(reason !== undefined ? { reason } : {}),
        ...(by !== undefined ? { by } : {}),
      });
      switch (outcome.status) {
        case 'settled':
        case 'settled_before':
          return outcome.resolution;
        case 'run_ended':
          throw new RequestError('not_pending', `tool call '${tool_call_id}' of run '${run_id}' is no longer waiting: the run has ended (${status})`);
        default:
          throw new RequestError('not_pending', `tool call '${tool_call_id}' never waited for approval in run '${run_id}'`);
      }
    });
  }

  /** Answers a call waiting for its result (SPEC §20); the arguments are checked by the client. */
  submitToolResult(run_id: string, tool_call_id: string, answer: ToolResultInput): Promise<ToolResultAnswer> {
    const { store, reach, prefix } = this.context;
    return reach(() => answerToolResult({ store, queues: this.queues, prefix }, run_id, tool_call_id, answer));
  }

  /** After a thread run ended: the first job of the thread's next run is added (see `startNextOnThread`). */
  startNextOnThread(run_id: string): Promise<void> {
    return startNextOnThread(this.context.threads, this.queues, run_id);
  }

  /** Adds a round's join (a cancelled child's parent goes on: see `settleParentOf`). */
  join(target: JoinTarget, data: ProviderJobData): Promise<void> {
    return this.queues.join(target, data);
  }

  /** Removes a closed call's job from its tool's queue (see `stopClosedWork`). */
  removeToolJob(call: ToolQueueOf, run_id: string, job_id: string): Promise<void> {
    return this.queues.removeToolJob(call, run_id, job_id);
  }

  async close(): Promise<void> {
    await this.queues.close();
  }

  /**
   * A new run's id: in a partition when there are several — its thread's (so the run's scripts
   * reach the thread), else by its idempotency key, else at random.
   */
  private async mintRunId(idempotency_key: string | undefined, thread_id: string | undefined): Promise<string> {
    // A key's or a thread's partition, and where it was used before (findIdempotent, locate), follow
    // the map as it is now: another process may have used it under partitions added since this one last read it.
    const { count } = await this.context.store.partitions.read(idempotency_key !== undefined || thread_id !== undefined);
    if (count <= 1) return newRunId();
    if (thread_id !== undefined) {
      // Where the thread lives, so the run's scripts reach it in one slot.
      const { k } = await this.context.threads.locate(thread_id);
      return k === undefined ? newRunId() : partitionedRunId(k);
    }
    return partitionedRunId(idempotency_key === undefined ? randomInt(count) : partitionOfKey(idempotency_key, count));
  }
}

/** What a run is created and started with: its registration, its workflow's graph (if one), the steps it starts with, its trace. */
interface RunPlan {
  readonly registration: AgentRegistration;
  readonly graph: WorkflowGraph | undefined;
  readonly roots: readonly string[];
  readonly trace: RunTrace;
}

/**
 * The request checked against what the worker registered: a workflow's input, config and test
 * mode, or an agent's. Returns the workflow's graph, if any. A refused config names the agent
 * (SPEC §5), after the key it names.
 */
function checkAgainstRegistration(request: EnqueueRequest, registration: AgentRegistration): WorkflowGraph | undefined {
  try {
    return checkRequestFor(request, registration);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new ConfigError(`${error.message} (${registration.workflow ? 'workflow' : 'agent'} '${request.agent}'; nothing was queued)`);
  }
}

function checkRequestFor(request: EnqueueRequest, registration: AgentRegistration): WorkflowGraph | undefined {
  const graph = registration.workflow;
  if (graph) {
    if (request.thread_id !== undefined) throw new RequestError('invalid_request', `thread_id: '${request.agent}' is a workflow; threads are for agent runs`);
    checkWorkflowInput(request.input, request.agent);
    checkWorkflowConfig(graph, request.config);
    checkWorkflowExecConfig(graph, request.exec_config);
    return graph;
  }
  // An agent has one step: a script for any other would never be used.
  checkExecSteps(checkExecConfig(request.exec_config), ['s1'], `agent '${request.agent}'`);
  const own = checkRunConfig(request.config);
  // A forced tool must be one the agent has: the registration names its tools.
  if (own.model_settings) checkToolChoice(own.model_settings, registration.tools, 'config.model_settings');
  return undefined;
}

/** A new workflow run's steps: its roots running (with their `StepStarted`), a fork's kept steps completed, the rest pending. */
function initialSteps(graph: WorkflowGraph, roots: readonly string[], kept: readonly string[] = []): InitialSteps {
  return {
    statuses: graph.steps.map((step) => [step.id, roots.includes(step.id) ? 'running' : kept.includes(step.id) ? 'completed' : 'pending'] as const),
    started: graph.steps.filter((step) => roots.includes(step.id)).map(stepStartedEvent),
  };
}
