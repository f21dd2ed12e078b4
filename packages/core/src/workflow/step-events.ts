import { byteSize } from '../canonical.ts';
import type { EventDraft } from '../events/types.ts';
import type { RunError } from '../run-record.ts';
import { type GraphStep, RUN_STEP_ID, type StepSkip, type WorkflowGraph } from './graph.ts';

/** A workflow run's `RunEnqueued`. */
export function workflowEnqueuedEvent(graph: WorkflowGraph): EventDraft {
  return { kind: 'RunEnqueued', step_id: RUN_STEP_ID, workflow: graph.name, steps_count: graph.steps.length };
}

/** `StepStarted`: a step's dependencies have all completed. */
export function stepStartedEvent(step: GraphStep): EventDraft {
  return { kind: 'StepStarted', step_id: step.id, step_type: step.type, depends_on: [...step.depends_on] };
}

/** `StepCompleted`, `duration_ms` after the step started. */
export function stepCompletedEvent(step_id: string, output: string, duration_ms: number): EventDraft {
  return { kind: 'StepCompleted', step_id, output_size_bytes: byteSize(output), duration_ms };
}

/** `StepSkipped`: the step will not run. */
export function stepSkippedEvent(skip: StepSkip): EventDraft {
  return { kind: 'StepSkipped', step_id: skip.step_id, reason: skip.reason, ...(skip.failed_dependency !== undefined ? { failed_dependency: skip.failed_dependency } : {}) };
}

/**
 * The error of a step that completed with state changes that do not fit the run's state as it stands
 * when the step completes (SPEC §17, "the limit holds", for parallel steps): none of them applies.
 */
export function stepStateTooLarge(step_id: string, max_state_bytes: number): RunError {
  return {
    code: 'StepExecutionFailed',
    error_code: 'state_too_large',
    message: `step '${step_id}': its state changes would take the run's state over max_state_bytes (${max_state_bytes})`,
  };
}
