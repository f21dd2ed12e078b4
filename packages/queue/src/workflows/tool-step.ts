import {
  type EventDraft,
  RUN_STEP_ID,
  type RunError,
  type StateChange,
  type ToolLogger,
  type WorkflowStep,
  checkExecConfig,
  markApproval,
  plannedCallEvents,
  planToolStep,
  stepCompletedEvent,
  stepFailedEvent,
  testStepFor,
  toolDefinitionHash,
} from '@arcflow/core';
import type { Span } from '@opentelemetry/api';
import type { Job } from 'bullmq';
import { workflowInputText } from '../records/input-format.ts';
import type { RunSpec } from '../records/run-spec.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { StepEnding } from './workflow-store.ts';
import { childCarrier } from '../tracing.ts';
import { requestApproval } from '../calls/waiting/approvals.ts';
import type { ProviderJobData, ToolJobData } from '../jobs/jobs.ts';
import type { ResolvedWorkerOptions } from '../config/options.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { WorkflowRun, WorkflowScheduler } from './workflow-scheduler.ts';

type ToolStep = Extract<WorkflowStep, { type: 'tool' }>;

/** What a tool step needs of the worker. */
export interface ToolStepDeps {
  readonly store: RunStore;
  readonly logger: ToolLogger;
  readonly options: Pick<ResolvedWorkerOptions, 'tool_backoff_ms'>;
  readonly queues: Dispatcher;
  readonly scheduler: WorkflowScheduler;
}

/**
 * A workflow's tool step, on the workflow's provider queue: job 1 builds the call's arguments from
 * the run input and its dependencies' outputs, validates them, and opens the call as round 1 of
 * the step (tool_call_id = the step id) with one tool job, like any call a model asked for; the
 * tool job that settles it enqueues job 2, which settles the step from the recorded result.
 */
export class ToolStepProcessor {
  constructor(private readonly deps: ToolStepDeps) {}

  async process(job: Job<ProviderJobData>, span: Span, spec: RunSpec, run: WorkflowRun, step: ToolStep): Promise<string> {
    return job.data.iteration === 1 ? this.start(job, span, spec, run, step) : this.finish(run, step);
  }

  private async start(job: Job<ProviderJobData>, span: Span, spec: RunSpec, run: WorkflowRun, step: ToolStep): Promise<string> {
    const { store, logger, options, queues } = this.deps;
    const { run_id } = spec;
    const test = testStepFor(checkExecConfig(spec.exec_config), step.id);
    if (test && 'output' in test)
      return this.settle(run, { step_id: step.id, outcome: { status: 'completed', output: test.output }, completed: stepCompletedEvent(step.id, test.output, 0) });
    const outputs = await store.workflows.outputs(run_id, step.depends_on);
    const built = planToolStep(step, { input: workflowInputText(spec.input, run_id), outputs: outputs as Record<string, string> });
    if (!built.ok) {
      logger.error('workflow step input failed', { run_id, step_id: step.id, error: built.thrown ?? built.error.message });
      return this.fail(run, step.id, built.error);
    }
    const planned = built.value;
    const place = { step_id: step.id, iteration: 1 };
    if (planned.action !== 'execute') {
      const error: RunError = {
        code: 'StepExecutionFailed',
        error_code: 'invalid_arguments',
        message: `step '${step.id}': its arguments fail the schema of tool '${step.tool.name}'`,
      };
      return this.fail(run, step.id, error, plannedCallEvents(planned, place));
    }
    // A tool that needs approval asks in a tool step too (SPEC §10); a re-delivery asks again, which the approvals dedupe.
    const call = markApproval(planned, place, run_id, logger);
    const opened = await store.workflows.openToolStep(run_id, step.id, step.tool.name, toolDefinitionHash(step.tool));
    if (!opened) return 'run-ended';
    const trace = childCarrier(job.data.trace, span);
    if (opened.open === 0) {
      // Settled already (a re-delivery after the call's job finished): on to the join.
      await queues.join(run.queue, { run_id, step_id: step.id, iteration: 2, trace });
      return 'joined';
    }
    const data: ToolJobData = {
      run_id,
      step_id: step.id,
      iteration: 1,
      index: 0,
      tool_call_id: step.id,
      tool_name: step.tool.name,
      definition_hash: toolDefinitionHash(step.tool),
      args: call.args,
      input_size_bytes: call.input_size_bytes,
      trace,
      join: run.queue,
      workflow: spec.agent,
      ...(call.approval ? { waits: true } : {}),
      // Its handler sees the run's state as it stands now (SPEC §17); its changes apply when the step completes.
      ...(await runStateFields(store, run_id)),
    };
    if (call.approval) {
      await requestApproval({ store, queues, tool_backoff_ms: options.tool_backoff_ms, logger }, call, place, data);
      return 'waiting';
    }
    await queues.addToolJob(step.tool, data, options.tool_backoff_ms);
    return 'fanned-out';
  }

  /** Job 2 (when the call's own job did not settle the step): the step completes with the call's result, or fails with its code. */
  private async finish(run: WorkflowRun, step: ToolStep): Promise<string> {
    const settled = await this.deps.scheduler.settle(run, toolStepEnding(step.id, step.tool.name, await this.deps.store.workflows.toolStepResult(run.run_id, step.id)));
    return settled ? 'step-done' : 'run-ended';
  }

  private fail(run: WorkflowRun, step_id: string, error: RunError, before: readonly EventDraft[] = []): Promise<string> {
    const events = [...before, stepFailedEvent(step_id, error)].map((event) => ({ event }));
    return this.settle(run, { step_id, outcome: { status: 'failed', error }, events });
  }

  private async settle(run: WorkflowRun, ending: StepEnding): Promise<string> {
    const settled = await this.deps.scheduler.settle(run, ending);
    return settled ? 'step-done' : 'run-ended';
  }
}

/** A tool step's end from its call's recorded result: completed with the result, or failed with the call's code. */
export function toolStepEnding(step_id: string, tool_name: string, result: { content: string; failure: string; changes?: readonly StateChange[] } | undefined): StepEnding {
  if (result && result.failure === '') {
    return {
      step_id,
      outcome: { status: 'completed', output: result.content },
      completed: stepCompletedEvent(step_id, result.content, 0),
      ...(result.changes && result.changes.length > 0 ? { state_changes: result.changes } : {}),
    };
  }
  const code = result?.failure ?? 'tool_error';
  const why = result ? `tool '${tool_name}' failed (${code})` : `the result of tool '${tool_name}' is missing`;
  const error: RunError = { code: 'StepExecutionFailed', error_code: code, message: `step '${step_id}': ${why}` };
  return { step_id, outcome: { status: 'failed', error }, events: [{ event: stepFailedEvent(step_id, error) }] };
}

/** A tool step's view of the run state: the entries of the run's state log (the log of step `run`) as the step starts. */
async function runStateFields(store: RunStore, run_id: string): Promise<Pick<ToolJobData, 'state_entries' | 'state_step'>> {
  const entries = await store.stateLogs.length(run_id, RUN_STEP_ID);
  return entries > 0 ? { state_entries: entries, state_step: RUN_STEP_ID } : {};
}
