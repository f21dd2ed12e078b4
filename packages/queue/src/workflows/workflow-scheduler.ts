import {
  type GraphStep,
  RUN_STEP_ID,
  type ToolLogger,
  type WorkflowEnd,
  type Workflow,
  type WorkflowGraph,
  type WorkflowRunConfig,
  modelTargets,
  planMoves,
  sinkSteps,
  stepRunConfig,
  stepCompletedEvent,
  workflowOutput,
  workflowRunError,
  type StateChange,
} from '@arcflow/core';
import { recordStep } from '@arcflow/telemetry/metrics';
import type { Redis } from 'ioredis';
import { QueueName } from '../redis/keys.ts';
import type { AgentRegistration, Registry } from '../records/registry.ts';
import { CANCEL_CLOSING, type RunEnding } from '../runs/ending.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { StepEnding, StepsView } from './workflow-store.ts';
import { emitStepSpan, firstJobCarrier, stepTraceparent } from '../tracing.ts';
import { endRun, stopClosedWork } from '../runs/end-run.ts';
import { type JoinTarget, type ProviderJobData, type TraceCarrier, providerAttempts, stepTargets } from '../jobs/jobs.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';

/** What the scheduler needs of a workflow run: its graph, its provider queue, and the run's trace. */
export interface WorkflowRun {
  readonly run_id: string;
  readonly graph: WorkflowGraph;
  /**
   * The workflow's provider queue: every step's provider jobs (and a tool step's join) go there,
   * with `attempts` per model: an agent step's jobs get that times its `targets`.
   */
  readonly queue: JoinTarget;
  /** How many models each agent step may call (its agent's and its fallbacks); absent: one. */
  readonly targets?: Readonly<Record<string, number>>;
  readonly trace: { readonly traceparent?: string; readonly request?: string };
}

/** The scheduler's view of a run of `workflow` on this worker: its provider queue takes `attempts` per model per job. */
export function workflowRunOf(workflow: Workflow, spec: { run_id: string; config?: unknown; trace: WorkflowRun['trace'] }, attempts: number): WorkflowRun {
  const config = spec.config as WorkflowRunConfig | undefined;
  const targets = Object.fromEntries(
    workflow.steps.flatMap((step) => (step.type === 'agent' ? [[step.id, stepTargets(stepRunConfig(config, step.id), modelTargets(step.agent, step.agent.settings).length)]] : [])),
  );
  return { run_id: spec.run_id, graph: workflow.graph, queue: { queue: QueueName.agent(workflow.name), attempts }, targets, trace: spec.trace };
}

export interface SchedulerDeps {
  readonly store: RunStore;
  readonly queues: Dispatcher;
  readonly redis: Redis;
  readonly logger: ToolLogger;
}

/**
 * Moves workflow runs on (SPEC §7). A step that ends is settled once in the store; whoever
 * settles it, or reads the steps afterwards, decides with `planMoves` what starts, what is
 * skipped and whether the run ends, and applies it: statuses move in Redis (each move once),
 * then the started steps' first jobs are added under deterministic ids. Two steps that finish at
 * once on two workers both decide; the store lets one start each dependent, and BullMQ adds each
 * job once. A crash between the two leaves the job that settled the step to be re-delivered
 * (it settles nothing twice and decides again), or the watchdog to decide.
 */
export class WorkflowScheduler {
  constructor(private readonly deps: SchedulerDeps) {}

  /**
   * A step ended: it is settled once, then the run moves on. Settled before (a re-delivery), its
   * dependents already started get their first jobs again, in case the process that started them
   * died before adding them (the ids make this add nothing otherwise). Returns whether this call
   * settled it.
   */
  async settle(run: WorkflowRun, ending: StepEnding): Promise<{ settledNow: boolean; started_at?: number } | undefined> {
    const settled = await this.deps.store.workflows.settleStep(run.run_id, ending);
    if (!settled) return undefined;
    if (!settled.settledNow) {
      const started = run.graph.steps.filter((step) => step.depends_on.includes(ending.step_id) && settled.view.statuses[step.id] === 'running');
      await this.enqueueFirstJobs(run, started);
    }
    await this.advance(run, settled.view);
    return { settledNow: settled.settledNow, started_at: settled.view.started[ending.step_id] };
  }

  /** Decides on the steps as they stand and acts: starts ready steps, skips blocked ones, ends the run when nothing can start. */
  async advance(run: WorkflowRun, view?: StepsView): Promise<void> {
    const { store } = this.deps;
    const current = view ?? (await store.workflows.view(run.run_id));
    const moves = planMoves(run.graph, current.statuses, current.first_failed);
    const start = moves.start.map((id) => run.graph.steps.find((step) => step.id === id)!);
    if ((start.length > 0 || moves.skip.length > 0) && !(await store.workflows.startSteps(run.run_id, start, moves.skip))) return;
    if (moves.end) {
      await this.end(run, moves.end);
      return;
    }
    await this.enqueueFirstJobs(run, start);
  }

  /** Adds the first job of each step (a step already started adds nothing: job ids are deterministic). */
  async enqueueFirstJobs(run: WorkflowRun, steps: readonly GraphStep[]): Promise<void> {
    await Promise.all(
      steps.map((step) => {
        const data: ProviderJobData = { run_id: run.run_id, step_id: step.id, iteration: 1, trace: stepCarrier(run.trace, step) };
        return this.deps.queues.startStep({ queue: run.queue.queue, attempts: providerAttempts(run.queue.attempts, run.targets?.[step.id] ?? 1) }, data);
      }),
    );
  }

  /**
   * Ends the run: `completed` with its sinks' output, or `failed` (`step_failed`) naming the step
   * that failed first; steps still running (`fail_fast`) are cancelled, with their open calls.
   */
  private async end(run: WorkflowRun, end: WorkflowEnd): Promise<void> {
    const { store } = this.deps;
    const sinks = sinkSteps(run.graph);
    const output = workflowOutput(run.graph, await store.workflows.outputs(run.run_id, sinks));
    const ending: RunEnding =
      end.status === 'completed'
        ? { outcome: { status: 'completed', output: output ?? '' }, step_id: RUN_STEP_ID }
        : {
            outcome: {
              status: 'failed',
              error: workflowRunError(end.failed_step, await store.workflows.stepError(run.run_id, end.failed_step)),
              ...(output !== undefined ? { output } : {}),
            },
            step_id: RUN_STEP_ID,
            steps: { running: 'cancelled', skip_reason: 'run_failed' },
            closing: CANCEL_CLOSING,
          };
    const { ended, closed } = await endRun(store, run.run_id, ending);
    if (ended && end.status === 'failed' && run.graph.on_step_failure === 'fail_fast') {
      await stopClosedWork(this.deps.redis, store, this.deps.queues, run.run_id, closed);
    }
  }
}

/** How long a workflow's registration is reused before it is read again. */
const DIRECTORY_CACHE_MS = 5_000;

/** Workflows as workers registered them (graph, provider queue), read from the registry and kept a few seconds. */
export class WorkflowDirectory {
  private readonly cache = new Map<string, { registration: AgentRegistration | undefined; at: number }>();

  constructor(private readonly registry: Registry) {}

  /** The scheduler's view of a run of `workflow`, or undefined when no worker registered it as a workflow. */
  async run(workflow: string, run_id: string, trace: TraceCarrier): Promise<WorkflowRun | undefined> {
    let cached = this.cache.get(workflow);
    if (!cached || Date.now() - cached.at > DIRECTORY_CACHE_MS) {
      cached = { registration: await this.registry.registration(workflow), at: Date.now() };
      this.cache.set(workflow, cached);
    }
    const registration = cached.registration;
    if (!registration?.workflow) return undefined;
    return {
      run_id,
      graph: registration.workflow,
      queue: { queue: registration.provider_queue, attempts: registration.provider_attempts },
      // The run's config is not read here: a step whose run lists its own fallbacks gets its agent's
      // count of attempts, shared evenly among the run's models (see ModelRouter.prepare).
      targets: registration.model_targets ?? {},
      trace: trace.traceparent ? { traceparent: trace.traceparent } : {},
    };
  }
}

/** The trace carrier of a step's first job: an agent step's jobs nest under its own span, a tool step's under the run's root. */
export function stepCarrier(runTrace: WorkflowRun['trace'], step: GraphStep): TraceCarrier {
  if (!runTrace.traceparent) return {};
  const carrier = firstJobCarrier(runTrace as { traceparent: string; request?: string });
  return step.type === 'agent' ? { ...carrier, traceparent: stepTraceparent(runTrace.traceparent, step.id) } : carrier;
}

/**
 * Settles a workflow agent step from the ending an agent run would have had (`AgentResponseReceived`
 * or `StepExecutionFailed` among its events), with its `StepCompleted`; the process that settles it
 * emits the step's span.
 */
export async function settleAgentStep(
  scheduler: WorkflowScheduler,
  run: WorkflowRun,
  agent: string,
  ending: RunEnding,
  state?: { readonly changes: readonly StateChange[]; readonly max_state_bytes: number },
): Promise<void> {
  const { outcome, step_id } = ending;
  if (outcome.status === 'cancelled') throw new Error('a step does not end cancelled on its own');
  const settled = await scheduler.settle(run, {
    step_id,
    outcome,
    events: ending.events ?? [],
    ...(outcome.status === 'completed' ? { completed: stepCompletedEvent(step_id, outcome.output, 0) } : {}),
    ...(state && state.changes.length > 0 ? { state_changes: state.changes, max_state_bytes: state.max_state_bytes } : {}),
  });
  if (settled?.settledNow && settled.started_at !== undefined) {
    recordStep(agent, Math.max(0, Date.now() - settled.started_at) / 1000, outcome.status === 'failed' ? outcome.error.error_code : undefined);
    emitStepSpan(run.trace.traceparent, {
      run_id: run.run_id,
      step_id,
      agent,
      started_at: settled.started_at,
      ...(outcome.status === 'failed' ? { error_code: outcome.error.error_code } : {}),
    });
  }
}
