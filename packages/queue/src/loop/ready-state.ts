import {
  type PlannedCall,
  RUN_STEP_ID,
  type StepState,
  type WorkflowStep,
  applyFinalAnswerNote,
  applyOutputRepair,
  applyToolRound,
  buildAgentStepInput,
  initialStepState,
  lostCall,
  stateAsChanges,
} from '@arcflow/core';
import { workflowInputText } from '../records/input-format.ts';
import type { PendingEvent } from '../records/event-codec.ts';
import type { StateEntry, StepSnapshot } from '../steps/step-store.ts';
import { injectSteered } from '../threads/thread-run.ts';
import { roundCall } from '../calls/tool-execution.ts';
import { joinRoundState } from './state-join.ts';
import { failStep } from './end-step.ts';
import { type ProviderJobDeps, type StepContext, invokedEvent } from './step-context.ts';

/** A state ready for a provider call, with what must be saved before the call. */
export interface PendingState {
  readonly state: StepState;
  /** The stored iterations to compare-and-set against; undefined when nothing needs saving. */
  readonly expected: number | undefined;
  readonly events: readonly PendingEvent[];
  /** The folded round's run-state changes (SPEC §17), saved with the state. */
  readonly stateEntry?: StateEntry;
}

/**
 * The state ready for call `n`, and what must be saved first: the step's first state (with
 * `AgentInvoked`), or round `n-1` folded in, with the messages steered into the run meanwhile.
 * `stale` when this job is; `step-done` when a workflow step's input could not be built (the step
 * failed); `thread-waiting` when another run of its thread is active (that run's end adds this
 * run's first job again, see `startNextOnThread`).
 */
export async function readyState(deps: ProviderJobDeps, context: StepContext, snapshot: StepSnapshot): Promise<PendingState | 'step-done' | 'thread-waiting' | 'stale'> {
  const { data } = context;
  const stored = snapshot.state;
  let ready: PendingState | 'step-done' | 'thread-waiting' | 'stale';
  if (!stored && data.iteration === 1) ready = await firstState(deps, context, snapshot);
  else if (stored?.iterations === data.iteration - 1) ready = { state: stored, expected: undefined, events: [] };
  else if (stored?.iterations === data.iteration - 2) ready = await joinRound(deps, context, stored, snapshot);
  else ready = 'stale';
  if (typeof ready === 'string' || ready.expected === undefined || context.workflow) return ready;
  // Messages steered into the run (SPEC §11) enter the state this call is made on.
  const steered = await injectSteered(deps.threads, data.run_id, ready.state, data.iteration);
  if (!steered.event) return ready;
  return { ...ready, state: steered.state, events: [...ready.events, { event: steered.event, once: `injected|${data.step_id}|${data.iteration}` }] };
}

/** The step's first state, with its `AgentInvoked`. */
async function firstState(deps: ProviderJobDeps, context: StepContext, snapshot: StepSnapshot): Promise<PendingState | 'step-done' | 'thread-waiting'> {
  const { spec, agent, data } = context;
  const input = context.workflow ? await workflowStepInput(deps, context) : spec.input;
  if (input === undefined) return 'step-done';
  // A run on a thread starts on the thread's conversation so far (SPEC §11); one on none has no history to read.
  const thread = context.workflow || !snapshot.onThread ? undefined : await deps.threads.history(spec.run_id);
  if (thread && 'waiting' in thread) return 'thread-waiting';
  const earlier = thread && thread.count > 0 ? await deps.store.threadMessages(spec.run_id, thread) : [];
  const invoked: PendingEvent = invokedEvent(context);
  const first = initialStepState(agent, input, data.step_id, earlier);
  if (context.workflow) {
    // A workflow step starts from the run's state as it stands (SPEC §17), kept as its state log's first entry.
    const stateEntry = await runStateNow(deps, spec.run_id);
    return { state: { ...first, state_entries: 1 }, expected: -1, events: [invoked], stateEntry };
  }
  // The run state's recorded entries so far: its initial state, or the one its thread left (SPEC §17).
  const state_entries = thread ? thread.state_entries : snapshot.stateEntries;
  return { state: { ...first, ...(state_entries > 0 ? { state_entries } : {}) }, expected: -1, events: [invoked] };
}

/** A workflow run's state as it stands (the run's state log), as a step's first state log entry. */
async function runStateNow(deps: ProviderJobDeps, run_id: string): Promise<StateEntry> {
  const { stateLogs } = deps.store;
  const { state, size } = await stateLogs.readSized(run_id, RUN_STEP_ID, await stateLogs.length(run_id, RUN_STEP_ID));
  return { at: 0, changes: stateAsChanges(state), state, size };
}

/**
 * A workflow agent step's input, from the run input and its dependencies' outputs as stored;
 * undefined when its input function failed (the step is failed with `input_error`).
 */
async function workflowStepInput(deps: ProviderJobDeps, context: StepContext): Promise<string | undefined> {
  const { spec, data } = context;
  const step = deps.workflows.get(spec.agent)!.step(data.step_id) as Extract<WorkflowStep, { type: 'agent' }>;
  const outputs = await deps.store.workflows.outputs(spec.run_id, step.depends_on);
  const built = buildAgentStepInput(step, { input: workflowInputText(spec.input, spec.run_id), outputs: outputs as Record<string, string> });
  if (built.ok) return built.value;
  deps.logger.error('workflow step input failed', { run_id: spec.run_id, step_id: data.step_id, error: built.thrown ?? built.error.message });
  await failStep(deps, context, built.error);
  return undefined;
}

/**
 * Saves the ready state (if it needs saving) together with `extra` events, in one step. If
 * another delivery saved first, its state stands and the events are appended on their own.
 * Undefined when this job is stale (or the run has ended).
 */
export async function commit(deps: ProviderJobDeps, context: StepContext, ready: PendingState, extra: readonly PendingEvent[]): Promise<StepState | undefined> {
  const { store } = deps;
  const { run_id, step_id, iteration } = context.data;
  if (ready.expected !== undefined) {
    const outcome = await store.saveState(run_id, ready.state, ready.expected, [...ready.events, ...extra], true, ready.stateEntry);
    if (outcome === 'saved') return ready.state;
    if (outcome === 'ended') return undefined;
    const current = await store.loadState(run_id, step_id);
    if (current?.iterations !== iteration - 1) return undefined;
    if (extra.length > 0 && !(await store.append(run_id, [...extra]))) return undefined;
    return current;
  }
  if (extra.length > 0 && !(await store.append(run_id, [...extra]))) return undefined;
  return ready.state;
}

/** Round `n-1` joined: its results folded into the messages, its calls' run-state changes applied (SPEC §17). */
async function joinRound(deps: ProviderJobDeps, context: StepContext, stored: StepState, snapshot: StepSnapshot): Promise<PendingState> {
  const folded = await foldRound(deps, context, stored, snapshot);
  const { run_id, step_id } = context.data;
  const plan = snapshot.previousResponse?.plan;
  const callIds = plan?.type === 'tools' ? plan.calls.map((entry) => snapshot.previousResponse!.response.tool_calls[entry.index]!.id) : [];
  const place = { step_id, iteration: stored.iterations + 1 };
  const joined = await joinRoundState(deps.store, run_id, stored, place, callIds, snapshot.previousChanges);
  if (!joined) return { state: folded, expected: stored.iterations, events: [] };
  return {
    state: { ...folded, state_entries: joined.entry.at + 1 },
    expected: stored.iterations,
    events: joined.event ? [{ event: joined.event, once: `state|${step_id}|${place.iteration}` }] : [],
    stateEntry: joined.entry,
  };
}

/**
 * Round `n-1` folded in from its recorded response and the plan recorded with it (never decided
 * again: a deploy between two jobs must not change what was fanned out), with the recorded
 * results in call order.
 */
async function foldRound(deps: ProviderJobDeps, context: StepContext, state: StepState, snapshot: StepSnapshot): Promise<StepState> {
  const { run_id, step_id } = context.data;
  const previous = state.iterations + 1;
  const recorded = snapshot.previousResponse;
  if (!recorded) throw new Error(`response ${previous} of ${run_id}/${step_id} is missing`);
  const { response, plan } = recorded;
  if (plan.type === 'final_answer') return applyFinalAnswerNote(state, response);
  if (plan.type === 'repair_output') return applyOutputRepair(state, response, plan.violation_description);
  if (plan.type !== 'tools') throw new Error(`round ${previous} of ${run_id}/${step_id} did not ask for tools`);
  const place = { step_id, iteration: previous };
  const calls = plan.calls.map((entry) => ({ ...entry, call: response.tool_calls[entry.index]! }) as unknown as PlannedCall);
  const contents = new Map<number, string>();
  for (const [position, planned] of calls.entries()) {
    const { fanned_out } = plan.calls[position]!;
    if (planned.action === 'repeat') continue;
    let content = snapshot.previousResults[planned.call.id];
    if (content === undefined) {
      // Not expected: the round joins only once every call is closed with a result (a tool job that
      // failed for good is settled by the worker's `failed` handler). Kept so a join that finds a
      // result missing still answers the model instead of failing the run.
      const lost = lostCall(planned, place);
      content = (await deps.store.recordToolResult(run_id, roundCall(planned, place, fanned_out), lost))?.content ?? lost.content;
    }
    contents.set(planned.index, content);
  }
  return applyToolRound(state, context.settings, response, calls, contents);
}
