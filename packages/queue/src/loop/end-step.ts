import { type ResponseDecision, type RunError, type StepState, agentRespondedEvent, decideFixedOutput, stepFailedEvent, stepRunError } from '@arcflow/core';
import { OutputType } from '../records/output-format.ts';
import type { RunEnding } from '../runs/ending.ts';
import { endRun } from '../runs/end-run.ts';
import { settleAgentStep } from '../workflows/workflow-scheduler.ts';
import { stageThreadMessages } from '../threads/thread-run.ts';
import { type ProviderJobDeps, type StepContext, invokedEvent } from './step-context.ts';

/** The step has ended: an agent run ends with it; a workflow step is settled and its run moves on. */
export async function endStep(deps: ProviderJobDeps, context: StepContext, ending: RunEnding): Promise<void> {
  const { run_id } = context.data;
  if (!context.workflow) {
    await endRun(deps.store, run_id, ending, deps);
    return;
  }
  // A completed step's run-state changes (its state log after the run state it began with) apply to the run's state (SPEC §17).
  const changes = ending.outcome.status === 'completed' ? await deps.store.stateLogs.changesSince(run_id, ending.step_id, 1) : undefined;
  await settleAgentStep(deps.scheduler, context.workflow, context.agent.name, ending, changes && { changes, max_state_bytes: context.agent.max_state_bytes });
}

/** The step fails with `error` (its `StepFailed` the last event). */
export function failStep(deps: ProviderJobDeps, context: StepContext, error: RunError): Promise<void> {
  return endStep(deps, context, failedWith(context.data.step_id, error, context.data.iteration));
}

/** A failed step's ending; `iteration`: the one it failed in. */
export function failedWith(step_id: string, error: RunError, iteration?: number): RunEnding {
  return { outcome: { status: 'failed', error }, step_id, events: [{ event: stepFailedEvent(step_id, error, iteration) }] };
}

/** A test-mode step given its output (`exec_config.test`): checked against the output schema like an answer, with no model to ask again. */
export function givenOutput(context: StepContext): { readonly output: string } | undefined {
  const { test, data } = context;
  return data.iteration === 1 && test && 'output' in test ? test : undefined;
}

/**
 * Ends a step on the output test mode gives it (see `givenOutput`). `saved`: the step's first
 * state, saved with its `AgentInvoked` (an agent run's); a completed run on a thread then gives
 * the thread its input and the output, as an answer would.
 */
export async function endOnGivenOutput(deps: ProviderJobDeps, context: StepContext, given: { readonly output: string }, saved?: StepState): Promise<'step-done'> {
  const { run_id, step_id } = context.data;
  const ending = endingFor(step_id, 0, decideFixedOutput(step_id, context.settings, given.output))!;
  if (!saved) {
    await endStep(deps, context, { ...ending, events: [invokedEvent(context), ...(ending.events ?? [])] });
    return 'step-done';
  }
  if (ending.outcome.status === 'completed') await stageThreadMessages(deps.threads, deps.store, { run_id, step_id, agent: context.agent }, saved, ending.outcome.output);
  await endStep(deps, context, ending);
  return 'step-done';
}

/**
 * How a decision ends the step, if it does: the outcome and the step's last events. A completed
 * step's output under an output schema is stored as JSON (`output_type`), so its record reads back
 * with `output_json` (SPEC §11).
 */
export function endingFor(step_id: string, iteration: number, decision: ResponseDecision): RunEnding | undefined {
  switch (decision.type) {
    case 'complete':
      return {
        outcome: { status: 'completed', output: decision.output, ...('output_json' in decision ? { output_type: OutputType.json } : {}) },
        step_id,
        events: [{ event: agentRespondedEvent(step_id, decision.output, iteration), once: `responded|${step_id}` }],
      };
    case 'fail': {
      const error = stepRunError(decision.error_code, decision.message);
      return { outcome: { status: 'failed', error }, step_id, events: [...decision.events.map((event) => ({ event })), { event: stepFailedEvent(step_id, error, iteration) }] };
    }
    default:
      return undefined;
  }
}
