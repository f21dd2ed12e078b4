import type { RunError, SkipReason, StepStatus } from '../run-record.ts';

/** The `step_id` of a workflow run's own events (`RunEnqueued`, its terminal event). Not a valid step id. */
export const RUN_STEP_ID = 'run';

export type StepType = 'agent' | 'tool';

/** Statuses a step never leaves. */
export const STEP_DONE: ReadonlySet<StepStatus> = new Set(['completed', 'failed', 'skipped', 'cancelled']);

export interface GraphStep {
  readonly id: string;
  readonly type: StepType;
  readonly depends_on: readonly string[];
  /** An agent step's tools, by name (what a run's `tool_choice: { name }` may name); absent in graphs registered before they were listed. */
  readonly tools?: readonly string[];
}

/** A workflow's shape: all the scheduler decides on, and what workers register for clients. */
export interface WorkflowGraph {
  readonly name: string;
  readonly on_step_failure: 'continue' | 'fail_fast';
  readonly steps: readonly GraphStep[];
}

export interface StepSkip {
  readonly step_id: string;
  readonly reason: SkipReason;
  /** The direct dependency that did not complete (`dependency_failed` only). */
  readonly failed_dependency?: string;
}

/** How a workflow run ends once no step can start. */
export type WorkflowEnd = { readonly status: 'completed' } | { readonly status: 'failed'; readonly failed_step: string };

/** What the scheduler does next, given every step's status. */
export interface WorkflowMoves {
  /** Steps whose dependencies have all completed: they start now, in graph order. */
  readonly start: readonly string[];
  readonly skip: readonly StepSkip[];
  /** Set when no step can start or is running after these moves (under `fail_fast`, at the first failure: running steps are cancelled). */
  readonly end?: WorkflowEnd;
}

/**
 * The workflow's decisions, in one place, for the queue engine and `runLocal` alike: which steps
 * start, which are skipped and why, and whether the run ends. `first_failed` is the step that
 * failed first (by time), when the caller knows it. Deciding twice on the same statuses gives
 * the same moves, so concurrent deciders agree; steps only move forward, so acting on an older
 * view never starts a step whose dependencies have not completed.
 */
export function planMoves(graph: WorkflowGraph, statuses: Readonly<Record<string, StepStatus | undefined>>, first_failed?: string): WorkflowMoves {
  const status = new Map(graph.steps.map((step) => [step.id, statuses[step.id] ?? 'pending']));
  const failed = first_failed ?? graph.steps.find((step) => status.get(step.id) === 'failed')?.id;
  if (graph.on_step_failure === 'fail_fast' && failed !== undefined && status.get(failed) === 'failed') {
    const skip = graph.steps.filter((step) => status.get(step.id) === 'pending').map((step) => ({ step_id: step.id, reason: 'run_failed' as const }));
    return { start: [], skip, end: { status: 'failed', failed_step: failed } };
  }
  const start: string[] = [];
  const skip: StepSkip[] = [];
  for (const step of topologicalOrder(graph)) {
    if (status.get(step.id) !== 'pending') continue;
    const blocked = step.depends_on.find((dependency) => {
      const state = status.get(dependency);
      return state !== undefined && state !== 'completed' && STEP_DONE.has(state);
    });
    if (blocked !== undefined) {
      status.set(step.id, 'skipped');
      skip.push({ step_id: step.id, reason: 'dependency_failed', failed_dependency: blocked });
    } else if (step.depends_on.every((dependency) => status.get(dependency) === 'completed')) {
      status.set(step.id, 'running');
      start.push(step.id);
    }
  }
  const open = [...status.values()].some((state) => state === 'pending' || state === 'running');
  if (open) return { start, skip };
  const notCompleted = failed ?? graph.steps.find((step) => status.get(step.id) !== 'completed')?.id;
  return { start, skip, end: notCompleted === undefined ? { status: 'completed' } : { status: 'failed', failed_step: notCompleted } };
}

/** The steps nothing depends on; the run's output comes from them. */
export function sinkSteps(graph: WorkflowGraph): string[] {
  const depended = new Set(graph.steps.flatMap((step) => step.depends_on));
  return graph.steps.filter((step) => !depended.has(step.id)).map((step) => step.id);
}

/** Steps with no dependencies: they start with the run. */
export function rootSteps(graph: WorkflowGraph): string[] {
  return graph.steps.filter((step) => step.depends_on.length === 0).map((step) => step.id);
}

/**
 * A workflow run's output: its only sink's output, or with several sinks the JSON text of an
 * object mapping each completed sink to its output; undefined when no sink completed.
 */
export function workflowOutput(graph: WorkflowGraph, outputs: Readonly<Record<string, string | undefined>>): string | undefined {
  const sinks = sinkSteps(graph);
  if (sinks.length === 1) return outputs[sinks[0]!];
  const completed = sinks.filter((id) => outputs[id] !== undefined);
  if (completed.length === 0) return undefined;
  return JSON.stringify(Object.fromEntries(completed.map((id) => [id, outputs[id]])));
}

/** The run's error when a step failed: `step_failed`, naming the step and its own error. */
export function workflowRunError(step_id: string, stepError: RunError | undefined): RunError {
  const cause = stepError ? ` (${stepError.error_code}): ${stepError.message}` : '';
  return { code: 'StepExecutionFailed', error_code: 'step_failed', message: `step '${step_id}' failed${cause}` };
}

/**
 * An agent step's default input: the run input, then for each direct dependency (in `depends_on`
 * order) a blank line, `[<step_id>]` on its own line, and its output.
 */
export function defaultStepInput(input: string, depends_on: readonly string[], outputs: Readonly<Record<string, string>>): string {
  let text = input;
  for (const dependency of depends_on) text += `\n\n[${dependency}]\n${outputs[dependency] ?? ''}`;
  return text;
}

/** The graph's steps, each after its dependencies (ties in definition order). */
export function topologicalOrder(graph: WorkflowGraph): GraphStep[] {
  const placed = new Set<string>();
  const order: GraphStep[] = [];
  while (order.length < graph.steps.length) {
    const before = order.length;
    for (const step of graph.steps) {
      if (!placed.has(step.id) && step.depends_on.every((dependency) => placed.has(dependency))) {
        placed.add(step.id);
        order.push(step);
      }
    }
    if (order.length === before) throw new Error(`workflow '${graph.name}' has a dependency cycle`);
  }
  return order;
}

/** A cycle as a list of step ids (first id repeated at the end), or undefined. */
export function findCycle(steps: readonly GraphStep[]): string[] | undefined {
  const dependencies = new Map(steps.map((step) => [step.id, step.depends_on]));
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (id: string): string[] | undefined => {
    if (state.get(id) === 'done') return undefined;
    if (state.get(id) === 'visiting') return [...path.slice(path.indexOf(id)), id];
    state.set(id, 'visiting');
    path.push(id);
    for (const dependency of dependencies.get(id) ?? []) {
      const cycle = visit(dependency);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(id, 'done');
    return undefined;
  };
  for (const step of steps) {
    const cycle = visit(step.id);
    if (cycle) return cycle;
  }
  return undefined;
}
