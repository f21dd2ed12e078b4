import { byteSize } from '../canonical.ts';
import type { EventDraft } from '../events/types.ts';
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
