import { DEFAULT_MAX_STATE_BYTES, type RunState, type StateChange, applyStateChangesSized, checkInitialState, stateSize } from '../state/run-state.ts';
import type { Workflow, WorkflowStep } from '../definitions/workflow.ts';
import { type Tokens, ZERO_TOKENS, usdOf } from '../vocabulary/tokens.ts';
import { runFinishedEvent, stepFailedEvent } from '../loop/step-events.ts';
import type { ExecConfig } from '../loop/test-mode.ts';
import { plannedCallEvents } from '../loop/tool-events.ts';
import { markApproval } from '../loop/approvals.ts';
import type { RunError, StepRecord, StepStatus } from '../run-record.ts';
import { type WorkflowEnd, planMoves, workflowOutput, workflowRunError } from '../workflow/graph.ts';
import { checkWorkflowConfig, checkWorkflowExecConfig, stepRunConfig, type WorkflowRunConfig } from '../workflow/request.ts';
import { buildAgentStepInput, planToolStep } from '../workflow/step-inputs.ts';
import { stepCompletedEvent, stepSkippedEvent, stepStartedEvent, stepStateTooLarge, workflowEnqueuedEvent } from '../workflow/step-events.ts';
import { LocalEventLog } from './event-log.ts';
import { LocalStep, type StepOutcome } from './local-step.ts';
import { type LocalChildren, LocalTools } from './local-tools.ts';
import type { LocalRun, LocalSpent, RunLocalOptions } from './local-options.ts';
import type { RunInput } from '../conversation/messages.ts';

/** How one step of a local workflow run ended. */
type Settled = { readonly status: 'completed'; readonly output: string } | { readonly status: 'failed'; readonly error: RunError } | { readonly status: 'cancelled' };

/**
 * A workflow run in this process, with the queue engine's semantics and events: the decisions are
 * `planMoves`'s, ready steps run concurrently, and a cancel (the `signal`) or a `fail_fast`
 * failure cancels the steps still running before the run's terminal event.
 */
export async function runLocalWorkflow(
  workflow: Workflow,
  input: string,
  run_id: string,
  options: RunLocalOptions,
  /** How the run's agent steps start child runs, given what the run has spent (their spend adds to it). */
  childrenFor: (spent: LocalSpent) => LocalChildren,
): Promise<LocalRun> {
  const config = checkWorkflowConfig(workflow.graph, options.config);
  const exec = checkWorkflowExecConfig(workflow.graph, options.exec_config);
  const created_at = Date.now();
  const log = new LocalEventLog(run_id, options.onEvent);
  log.append(workflowEnqueuedEvent(workflow.graph));
  const run = new LocalWorkflowRun(workflow, input, config, exec, log, options, checkInitialState(options.state) ?? {}, childrenFor);
  const end = await run.finished();
  const cancelled = end.status === 'cancelled';
  const error = end.status === 'failed' ? workflowRunError(end.failed_step, run.steps[end.failed_step]?.error) : undefined;
  log.append(runFinishedEvent('run', run.usage, error, cancelled));
  const output = workflowOutput(workflow.graph, Object.fromEntries(Object.entries(run.steps).map(([id, step]) => [id, step.status === 'completed' ? step.output : undefined])));
  return {
    run_id,
    status: cancelled ? 'cancelled' : error ? 'failed' : 'completed',
    agent: workflow.name,
    workflow: workflow.name,
    ...(output !== undefined ? { output } : {}),
    ...(error ? { error } : {}),
    usage: run.spent.cost_micros === undefined ? run.usage : { ...run.usage, cost_usd: usdOf(run.spent.cost_micros) },
    iterations: run.iterations,
    state: run.state,
    created_at,
    finished_at: Date.now(),
    steps: run.steps,
    events: log.events,
  };
}

class LocalWorkflowRun {
  readonly steps: Record<string, StepRecord> = {};
  usage: Tokens = ZERO_TOKENS;
  iterations = 0;
  private firstFailed: string | undefined;
  /** What every step has spent so far: one budget for the whole run. */
  readonly spent: LocalSpent = { tokens: 0, tool_calls: 0 };
  private readonly running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private readonly tools: LocalTools;
  private settle!: (end: WorkflowEnd | { status: 'cancelled' }) => void;
  private readonly ended: Promise<WorkflowEnd | { status: 'cancelled' }>;
  private over = false;

  constructor(
    private readonly workflow: Workflow,
    private readonly input: string,
    private readonly config: WorkflowRunConfig,
    private readonly exec: ExecConfig,
    private readonly log: LocalEventLog,
    private readonly options: RunLocalOptions,
    /** The run's state (SPEC §17): a step starts from it as it stands, and its changes apply when it completes. */
    public state: RunState,
    childrenFor: (spent: LocalSpent) => LocalChildren,
  ) {
    this.tools = new LocalTools(log, options, childrenFor(this.spent));
    for (const step of workflow.steps) this.steps[step.id] = { status: 'pending' };
    this.ended = new Promise((resolve) => (this.settle = resolve));
  }

  /** Runs the workflow until no step can start; resolves once every step it started has stopped. */
  async finished(): Promise<WorkflowEnd | { status: 'cancelled' }> {
    const onAbort = () => this.stop({ status: 'cancelled' }, 'cancelled');
    if (this.options.signal?.aborted) onAbort();
    else {
      this.options.signal?.addEventListener('abort', onAbort, { once: true });
      this.advance();
    }
    const end = await this.ended;
    this.options.signal?.removeEventListener('abort', onAbort);
    await Promise.all([...this.running.values()].map((step) => step.done));
    return end;
  }

  private statuses(): Record<string, StepStatus> {
    return Object.fromEntries(Object.entries(this.steps).map(([id, step]) => [id, step.status]));
  }

  private advance(): void {
    if (this.over) return;
    const moves = planMoves(this.workflow.graph, this.statuses(), this.firstFailed);
    for (const skip of moves.skip) {
      this.steps[skip.step_id] = { status: 'skipped' };
      this.log.append(stepSkippedEvent(skip));
    }
    if (moves.end) {
      this.stop(moves.end, 'run_failed');
      return;
    }
    for (const step_id of moves.start) this.start(this.workflow.step(step_id)!);
  }

  /** Ends the run: running steps are cancelled (and awaited), pending ones skipped with `reason`. */
  private stop(end: WorkflowEnd | { status: 'cancelled' }, reason: 'run_failed' | 'cancelled'): void {
    if (this.over) return;
    this.over = true;
    for (const [step_id, step] of this.running) {
      step.controller.abort(new Error(reason));
      this.steps[step_id] = { status: 'cancelled' };
    }
    for (const step of this.workflow.graph.steps) {
      if (this.steps[step.id]?.status !== 'pending') continue;
      this.steps[step.id] = { status: 'skipped' };
      this.log.append(stepSkippedEvent({ step_id: step.id, reason }));
    }
    this.settle(end);
  }

  private start(step: WorkflowStep): void {
    this.steps[step.id] = { status: 'running' };
    this.log.append(stepStartedEvent(step));
    const controller = new AbortController();
    const startedAt = performance.now();
    const done = this.runStep(step, controller.signal).then((settled) => {
      if (this.over) return;
      this.running.delete(step.id);
      if (settled.status === 'completed') {
        this.steps[step.id] = { status: 'completed', output: settled.output };
        this.log.append(stepCompletedEvent(step.id, settled.output, Math.round(performance.now() - startedAt)));
      } else if (settled.status === 'failed') {
        this.steps[step.id] = { status: 'failed', error: settled.error };
        this.firstFailed ??= step.id;
      }
      this.advance();
    });
    this.running.set(step.id, { controller, done });
  }

  private outputsFor(step: WorkflowStep): Record<string, string> {
    const outputs: Record<string, string> = {};
    for (const dependency of step.depends_on) outputs[dependency] = (this.steps[dependency] as { output: string }).output;
    return outputs;
  }

  private async runStep(step: WorkflowStep, signal: AbortSignal): Promise<Settled> {
    const inputs = { input: this.input, outputs: this.outputsFor(step) };
    const test = this.exec.test?.steps?.[step.id];
    if (step.type === 'tool') {
      if (test && 'output' in test) return { status: 'completed', output: test.output };
      const built = planToolStep(step, inputs);
      if (!built.ok) return this.failed(step.id, built.error, built.thrown);
      const planned = built.value;
      const place = { step_id: step.id, iteration: 1 };
      if (planned.action !== 'execute') {
        this.log.append(...plannedCallEvents(planned, place));
        return this.failed(step.id, {
          code: 'StepExecutionFailed',
          error_code: 'invalid_arguments',
          message: `step '${step.id}': its arguments fail the schema of tool '${step.tool.name}'`,
        });
      }
      this.tools.beginRound(step.id, this.state, DEFAULT_MAX_STATE_BYTES);
      // A tool that needs approval asks in a tool step too (SPEC §10).
      const call = markApproval(planned, place, this.log.run_id, this.tools.logger);
      const settled = call.approval ? await this.tools.settleAfterApproval(call, place, signal) : await this.tools.settle(call, place, signal, false);
      if (signal.aborted) return { status: 'cancelled' };
      if (settled.terminal.kind === 'ToolCallCompleted') {
        if (!this.applyStepChanges(this.tools.takeChanges(step.id, [planned]), DEFAULT_MAX_STATE_BYTES))
          return this.failed(step.id, stepStateTooLarge(step.id, DEFAULT_MAX_STATE_BYTES));
        return { status: 'completed', output: settled.content };
      }
      const code = settled.terminal.kind === 'ToolCallFailed' ? settled.terminal.error_code : 'tool_error';
      return this.failed(step.id, { code: 'StepExecutionFailed', error_code: code, message: `step '${step.id}': tool '${step.tool.name}' failed (${code})` });
    }
    const settings = step.agent.settingsFor(stepRunConfig(this.config, step.id));
    // A step test mode gives its output ends on it, checked as an answer is (LocalStep.run), before any input is built: no input is read.
    let input: RunInput = '';
    if (!(test && 'output' in test)) {
      const built = buildAgentStepInput(step, inputs);
      if (!built.ok) return this.failed(step.id, built.error, built.thrown);
      input = built.value;
    }
    const local = new LocalStep(step.agent, settings, this.exec, step.id, this.log, { ...this.options, signal }, this.tools, this.spent, this.state);
    const outcome: StepOutcome = await local.run(input);
    const fits = outcome.output === undefined || outcome.error !== undefined || this.applyStepChanges(outcome.changes, step.agent.max_state_bytes);
    this.usage = { input: this.usage.input + outcome.usage.input, output: this.usage.output + outcome.usage.output, total: this.usage.total + outcome.usage.total };
    this.iterations += outcome.iterations;
    if (outcome.error) return { status: 'failed', error: outcome.error };
    if (!fits) return this.failed(step.id, stepStateTooLarge(step.id, step.agent.max_state_bytes));
    if (outcome.output === undefined) return { status: 'cancelled' };
    return { status: 'completed', output: outcome.output };
  }

  /**
   * Applies a completed step's changes to the run's state as it stands now, if the result stays within
   * `max_state_bytes` (steps running side by side complete in any order: SPEC §17); false, changing
   * nothing, when it would not.
   */
  private applyStepChanges(changes: readonly StateChange[], max_state_bytes: number): boolean {
    if (changes.length === 0) return true;
    const applied = applyStateChangesSized(this.state, stateSize(this.state), changes);
    if (applied.size > max_state_bytes) return false;
    this.state = applied.state;
    return true;
  }

  /** A step that failed before its loop could (input or arguments): its `StepExecutionFailed`, and the cause in the log only. */
  private failed(step_id: string, error: RunError, thrown?: unknown): Settled {
    if (thrown !== undefined) this.tools.logger.error('workflow step input failed', { run_id: this.log.run_id, step_id, error: thrown });
    this.log.append(stepFailedEvent(step_id, error));
    return { status: 'failed', error };
  }
}
