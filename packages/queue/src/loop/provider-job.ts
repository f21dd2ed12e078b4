import {
  type Agent,
  NOTHING_SPENT,
  RUN_STEP_ID,
  stateAsChanges,
  type RunError,
  executedCalls,
  markApprovals,
  type Workflow,
  type WorkflowRunConfig,
  type WorkflowStep,
  buildAgentStepInput,
  stepRunConfig,
  type PlannedCall,
  type ProviderResponse,
  type ResponseDecision,
  type StepState,
  TERMINAL_STATUSES,
  agentInvokedEvent,
  applyFinalAnswerNote,
  applyOutputRepair,
  applyToolRound,
  checkExecConfig,
  decideFixedOutput,
  decideResponse,
  initialStepState,
  lostCall,
  requestSentEvent,
  responseEvents,
  stepFailedEvent,
  stepRunError,
  testStepFor,
} from '@arcflow/core';
import type { Span } from '@opentelemetry/api';
import { DelayedError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { linkSpans } from '../tracing.ts';
import { type RecordedResponse, StoredFormatError, planOf, samePlan, withRecordedApprovals } from '../records/formats.ts';
import { workflowInputText } from '../records/input-format.ts';
import type { PendingEvent } from '../records/event-codec.ts';
import type { RunEnding } from '../runs/ending.ts';
import type { RunSpec } from '../records/run-spec.ts';
import type { StateEntry, StepSnapshot } from '../steps/step-store.ts';
import { recordRunEnded } from '../metrics/run-ends.ts';
import { cancelChild, endRun, runEnded } from '../runs/end-run.ts';
import type { ProviderJobData } from '../jobs/jobs.ts';
import { type ModelRouter, type PreparedCall, callModel } from './model-call.ts';
import { CallStream } from '../streams/call-stream.ts';
import { runStreams } from '../streams/run-streams.ts';
import { pastPause, providerFailed } from './provider-failure.ts';
import { type RoundDeps, type StepContext, enqueueNext, fansOut, runRound } from './round.ts';
import { endingFor } from './step-ending.ts';
import { injectSteered, stageThreadMessages, startNextOnThread } from '../threads/thread-run.ts';
import { joinRoundState, roundStateOf } from './state-join.ts';
import { roundCall } from '../calls/tool-execution.ts';
import type { ToolStepProcessor } from '../workflows/tool-step.ts';
import type { ThreadStore } from '../threads/thread-store.ts';
import { type WorkflowRun, type WorkflowScheduler, settleAgentStep, workflowRunOf } from '../workflows/workflow-scheduler.ts';

export interface ProviderJobDeps extends RoundDeps {
  readonly agents: ReadonlyMap<string, Agent>;
  readonly workflows: ReadonlyMap<string, Workflow>;
  readonly scheduler: WorkflowScheduler;
  /** Runs a workflow's tool steps (their jobs are on the workflow's provider queue too). */
  readonly toolSteps: ToolStepProcessor;
  /** Which provider and model each try of a call goes to (SPEC §16). */
  readonly models: ModelRouter;
  /** The threads runs are on (SPEC §11). */
  readonly threads: ThreadStore;
  /** The worker's connection: a cancelled child's in-flight work is told on it. */
  readonly redis: Redis;
}

/** How long a job of a run this worker cannot read waits before it is offered again. */
const UNREADABLE_RETRY_MS = 30_000;

/** A state ready for a provider call, with what must be saved before the call. */
interface PendingState {
  readonly state: StepState;
  /** The stored iterations to compare-and-set against; undefined when nothing needs saving. */
  readonly expected: number | undefined;
  readonly events: readonly PendingEvent[];
  /** The folded round's run-state changes (SPEC §17), saved with the state. */
  readonly stateEntry?: StateEntry;
}

/** A response that stands for call `n` (its round was opened when it was recorded). */
type CalledProvider =
  /** Recorded now, with the decision taken on it; `ended` when the run ended in the same write. */
  | { readonly response: ProviderResponse; readonly decision: ResponseDecision; readonly ended: boolean }
  /** An earlier delivery's response (and plan) stands. */
  | { readonly recorded: RecordedResponse };

/**
 * Processes provider job `n` of a step: folds round `n-1` into the state (its tool jobs are this
 * settled, which is why this job exists), makes call `n` unless its response is already
 * recorded, and acts on the loop's decision: finish, fail, or fan the next round out as tool jobs
 * that enqueue provider job `n+1` once the last of them settles. Every write is idempotent, so a
 * re-delivered job is harmless.
 */
export class ProviderJobProcessor {
  constructor(private readonly deps: ProviderJobDeps) {}

  async process(job: Job<ProviderJobData>, span: Span, token?: string): Promise<string> {
    const { store } = this.deps;
    const { run_id, step_id, iteration } = job.data;
    let snapshot: StepSnapshot;
    try {
      snapshot = await store.loadStep(run_id, step_id, iteration);
    } catch (error) {
      if (error instanceof StoredFormatError) return this.unreadable(job, token, error);
      throw error;
    }
    // The join: this job gathers round n-1, so it links to that round's tool spans.
    linkSpans(span, Object.values(snapshot.previousSpans));
    const spec = snapshot.spec;
    if (!spec || TERMINAL_STATUSES.has(spec.status)) {
      // The process that ended the run may have died before it started the next run of its thread.
      if (spec) await startNextOnThread(this.deps.threads, this.deps.queues, run_id);
      return 'run-ended';
    }
    // A child whose parent has ended (a cancel that died before it reached the children) stops here (SPEC §13).
    if (snapshot.parent_run_id && !(await this.parentGoesOn(snapshot.parent_run_id))) {
      await cancelChild(this.deps.redis, store, this.deps.queues, run_id);
      return 'parent-ended';
    }
    const target = this.resolve(spec, step_id);
    if ('error' in target) {
      await endRun(store, run_id, { outcome: { status: 'failed', error: target.error }, step_id }, this.deps);
      return target.error.error_code;
    }
    if (target.type === 'tool') return this.deps.toolSteps.process(job, span, spec, target.run, target.step);
    const { agent, definition_hash } = target;
    if (spec.definition_hash !== '' && spec.definition_hash !== definition_hash) {
      // A deploy changed the agent (or workflow) since the run was enqueued: the run goes on, and says so once per change.
      const changed = { kind: 'DefinitionChanged', step_id, iteration, previous_hash: spec.definition_hash, current_hash: definition_hash } as const;
      await store.append(run_id, [{ event: changed, once: `definition|${spec.definition_hash}|${definition_hash}` }]);
    }
    const context: StepContext = {
      spec,
      agent,
      workflow: target.run,
      settings: agent.settingsFor(target.config),
      test: testStepFor(checkExecConfig(spec.exec_config), step_id),
      data: job.data,
      span,
      spent: snapshot.spent,
    };
    if (iteration === 1 && context.test && 'output' in context.test) {
      // Checked against the output schema like an answer, with no model to ask again.
      const ending = endingFor(step_id, 0, decideFixedOutput(step_id, context.settings, context.test.output))!;
      await this.endStep(context, { ...ending, events: [{ event: agentInvokedEvent(agent, context.settings, step_id), once: `invoked|${step_id}` }, ...(ending.events ?? [])] });
      return 'step-done';
    }
    let ready = await this.readyState(context, snapshot);
    if (ready === 'step-ended') return 'step-done';
    // Another run of its thread is active: that run's end adds this run's first job again (see `startNextOnThread`).
    if (ready === 'thread-waiting') return 'thread-waiting';
    if (!ready) return 'stale';
    if (ready.expected !== undefined && !context.workflow) {
      // Messages steered into the run (SPEC §11) enter the state this call is made on.
      const steered = await injectSteered(this.deps.threads, run_id, ready.state, iteration);
      if (steered.event) ready = { ...ready, state: steered.state, events: [...ready.events, { event: steered.event, once: `injected|${step_id}|${iteration}` }] };
    }
    if (snapshot.response) {
      // A re-delivery: the response and the plan decided on it are recorded already (never requested again).
      const state = await this.commit(context, ready, []);
      if (!state) return 'stale';
      await this.actOnRecorded(withRoundState(context, state), state, snapshot.response);
      return 'ok';
    }
    // Folding is deterministic, so the request built from this state is the one any delivery would
    // send; the call's recorded position (moved only by failed provider calls) says which of the step's models this try goes to.
    const site = { ...context, test: context.test && 'responses' in context.test ? context.test : undefined, job };
    let call = this.deps.models.prepare(site, ready.state, snapshot.position);
    // A call whose provider is paused by a 429 goes to a fallback elsewhere, or waits (throws DelayedError).
    const moved = 'error' in call ? undefined : await pastPause(this.deps, job, token, call);
    if (moved) call = this.deps.models.prepare(site, ready.state, moved);
    if ('error' in call) {
      const failed = { outcome: { status: 'failed', error: call.error }, step_id, events: [{ event: stepFailedEvent(step_id, call.error) }] } as const;
      if (await this.commit(context, ready, [])) await this.endStep(context, failed);
      return call.error.error_code;
    }
    const requestSent = requestSentEvent(step_id, iteration, call.provider_id, call.request);
    // One per delivery: a write sent again after a lost reply adds it once.
    const state = await this.commit(context, ready, [{ event: requestSent, once: `sent|${step_id}|${iteration}|${job.attemptsStarted}` }]);
    if (!state) return 'stale';
    const called = await this.callProvider(context, state, call, job, token);
    if (!called) return 'run-ended';
    if ('recorded' in called) await this.actOnRecorded(withRoundState(context, state), state, called.recorded);
    else if (called.ended) return 'step-done';
    else await this.act(withRoundState(context, state), called.decision);
    return 'ok';
  }

  /** Whether a child's parent run is still going: not ended, and not gone (retention removed it). */
  private async parentGoesOn(parent_run_id: string): Promise<boolean> {
    const status = await this.deps.store.status(parent_run_id);
    return status !== undefined && !TERMINAL_STATUSES.has(status);
  }

  /**
   * What the job's step runs: an agent run's agent, or a workflow step (an agent step with its
   * config, or a tool step); an error when this worker does not serve it.
   */
  private resolve(spec: RunSpec, step_id: string): StepTarget {
    const workflow = this.deps.workflows.get(spec.agent);
    if (!workflow) {
      const agent = this.deps.agents.get(spec.agent);
      if (!agent) return { error: stepRunError('unknown_agent', `this worker does not serve agent '${spec.agent}'`) };
      return { type: 'agent', agent, definition_hash: agent.definition_hash, config: spec.config, run: undefined };
    }
    const step = workflow.step(step_id);
    if (!step) return { error: stepRunError('unknown_step', `workflow '${workflow.name}' has no step '${step_id}'`) };
    const run = workflowRunOf(workflow, spec, this.deps.options.provider_attempts);
    if (step.type === 'tool') return { type: 'tool', step, run };
    return { type: 'agent', agent: step.agent, definition_hash: workflow.definition_hash, config: stepRunConfig(spec.config as WorkflowRunConfig, step_id), run, step };
  }

  /** The step has ended: an agent run ends with it; a workflow step is settled and its run moves on. */
  private async endStep(context: StepContext, ending: RunEnding): Promise<void> {
    const { run_id } = context.data;
    if (!context.workflow) {
      await endRun(this.deps.store, run_id, ending, this.deps);
      return;
    }
    // A completed step's run-state changes (its state log after the run state it began with) apply to the run's state (SPEC §17).
    const changes = ending.outcome.status === 'completed' ? await this.deps.store.stateLogs.changesSince(run_id, ending.step_id, 1) : undefined;
    await settleAgentStep(this.deps.scheduler, context.workflow, context.agent.name, ending, changes && { changes, max_state_bytes: context.agent.max_state_bytes });
  }

  /**
   * Acts again on a recorded response, as its plan says. This worker decides too; where its
   * decision differs from the plan (its agent changed since), the plan wins: a call decided
   * otherwise before is closed with a failure result (counted down if it was fanned out), so the
   * round's open count stays true and the round still joins.
   */
  private async actOnRecorded(context: StepContext, state: StepState, recorded: RecordedResponse): Promise<void> {
    const { agent, settings } = context;
    const decision = withRecordedApprovals(decideResponse(agent, state, settings, recorded.response, recorded.spent ?? NOTHING_SPENT), recorded.plan);
    const fanned = (planned: PlannedCall) => fansOut(planned, settings);
    const { plan } = recorded;
    if (samePlan(planOf(decision, fanned), plan)) return this.act(context, decision);
    const { run_id, step_id, iteration } = context.data;
    this.deps.logger.warn('this worker decides a recorded response differently (its agent changed); following the recorded plan', { run_id, step_id, iteration });
    if (plan.type === 'final_answer' || plan.type === 'repair_output') return enqueueNext(this.deps, context, []);
    // A response that completed or failed the step ended the run in the same write.
    if (plan.type !== 'tools') return;
    const mine = new Map(decision.type === 'tools' ? decision.calls.map((planned) => [planned.index, planned]) : []);
    const kept: PlannedCall[] = [];
    for (const entry of plan.calls) {
      const planned = mine.get(entry.index);
      if (planned && planned.action === entry.action && fanned(planned) === entry.fanned_out) {
        kept.push(planned);
        continue;
      }
      // A repeat is answered from earlier results when the round is folded.
      if (entry.action === 'repeat') continue;
      const decidedBefore = { call: recorded.response.tool_calls[entry.index]! } as PlannedCall;
      const place = { step_id, iteration };
      await this.deps.store.recordToolResult(run_id, roundCall(decidedBefore, place, entry.fanned_out), lostCall(decidedBefore, place));
    }
    await runRound(this.deps, context, kept);
  }

  /**
   * A run stored in a format this worker cannot read. Written by a newer arcflow: nothing is
   * written, the error is logged, and the job goes back to wait for a worker that can read it (the
   * watchdog leaves a delayed job alone). Unreadable by any version (not JSON, no format): the
   * run is failed, since no worker could ever take it on.
   */
  private async unreadable(job: Job<ProviderJobData>, token: string | undefined, error: StoredFormatError): Promise<string> {
    const { run_id, step_id, iteration } = job.data;
    if (!error.newer) {
      this.deps.logger.error('run stored unreadably; failing it', { run_id, step_id, iteration, error: error.message });
      const failure = stepRunError('unreadable_state', `${error.what} cannot be read (${JSON.stringify(error.found) ?? 'no format'}); the run cannot go on`);
      await endRun(this.deps.store, run_id, { outcome: { status: 'failed', error: failure }, step_id, events: [{ event: stepFailedEvent(step_id, failure) }] }, this.deps);
      return failure.error_code;
    }
    this.deps.logger.error('run stored in a format this worker cannot read; leaving it for a worker that can', { run_id, step_id, iteration, error: error.message });
    await job.moveToDelayed(Date.now() + UNREADABLE_RETRY_MS, token);
    throw new DelayedError();
  }

  /**
   * The state ready for call `n`, and what must be saved first: the step's first state (with
   * `AgentInvoked`), or round `n-1` folded in. Undefined when this job is stale; `step-ended` when
   * a workflow step's input could not be built (the step failed).
   */
  private async readyState(context: StepContext, snapshot: StepSnapshot): Promise<PendingState | 'step-ended' | 'thread-waiting' | undefined> {
    const { spec, agent, settings, data } = context;
    const stored = snapshot.state;
    if (!stored && data.iteration === 1) {
      const input = context.workflow ? await this.workflowStepInput(context) : spec.input;
      if (input === undefined) return 'step-ended';
      // A run on a thread starts on the thread's conversation so far (SPEC §11).
      const thread = context.workflow ? undefined : await this.deps.threads.history(spec.run_id);
      if (thread && 'waiting' in thread) return 'thread-waiting';
      const earlier = thread && thread.count > 0 ? await this.deps.store.threadMessages(spec.run_id, thread) : [];
      const invoked: PendingEvent = { event: agentInvokedEvent(agent, settings, data.step_id), once: `invoked|${data.step_id}` };
      const first = initialStepState(agent, input, data.step_id, earlier);
      if (context.workflow) {
        // A workflow step starts from the run's state as it stands (SPEC §17), kept as its state log's first entry.
        const stateEntry = await this.runStateNow(spec.run_id);
        return { state: { ...first, state_entries: 1 }, expected: -1, events: [invoked], stateEntry };
      }
      // The run state's recorded entries so far: its initial state, or the one its thread left (SPEC §17).
      const state_entries = thread ? thread.state_entries : snapshot.stateEntries;
      return { state: { ...first, ...(state_entries > 0 ? { state_entries } : {}) }, expected: -1, events: [invoked] };
    }
    if (stored?.iterations === data.iteration - 1) return { state: stored, expected: undefined, events: [] };
    if (stored?.iterations === data.iteration - 2) return this.joinRound(context, stored, snapshot);
    return undefined;
  }

  /** A workflow run's state as it stands (the run's state log), as a step's first state log entry. */
  private async runStateNow(run_id: string): Promise<StateEntry> {
    const { stateLogs } = this.deps.store;
    const { state, size } = await stateLogs.readSized(run_id, RUN_STEP_ID, await stateLogs.length(run_id, RUN_STEP_ID));
    return { at: 0, changes: stateAsChanges(state), state, size };
  }

  /**
   * A workflow agent step's input, from the run input and its dependencies' outputs as stored;
   * undefined when its input function failed (the step is failed with `input_error`).
   */
  private async workflowStepInput(context: StepContext): Promise<string | undefined> {
    const { spec, data } = context;
    const step = this.deps.workflows.get(spec.agent)!.step(data.step_id) as Extract<WorkflowStep, { type: 'agent' }>;
    const outputs = await this.deps.store.workflows.outputs(spec.run_id, step.depends_on);
    const built = buildAgentStepInput(step, { input: workflowInputText(spec.input, spec.run_id), outputs: outputs as Record<string, string> });
    if (built.ok) return built.value;
    this.deps.logger.error('workflow step input failed', { run_id: spec.run_id, step_id: data.step_id, error: built.thrown ?? built.error.message });
    await this.endStep(context, { outcome: { status: 'failed', error: built.error }, step_id: data.step_id, events: [{ event: stepFailedEvent(data.step_id, built.error) }] });
    return undefined;
  }

  /**
   * Saves the ready state (if it needs saving) together with `extra` events, in one step. If
   * another delivery saved first, its state stands and the events are appended on their own.
   */
  private async commit(context: StepContext, ready: PendingState, extra: readonly PendingEvent[]): Promise<StepState | undefined> {
    const { store } = this.deps;
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
  private async joinRound(context: StepContext, stored: StepState, snapshot: StepSnapshot): Promise<PendingState> {
    const folded = await this.foldRound(context, stored, snapshot);
    const { run_id, step_id } = context.data;
    const plan = snapshot.previousResponse?.plan;
    const callIds = plan?.type === 'tools' ? plan.calls.map((entry) => snapshot.previousResponse!.response.tool_calls[entry.index]!.id) : [];
    const place = { step_id, iteration: stored.iterations + 1 };
    const joined = await joinRoundState(this.deps.store, run_id, stored, place, callIds, snapshot.previousChanges);
    if (!joined) return { state: folded, expected: stored.iterations, events: [] };
    return {
      state: { ...folded, state_entries: joined.entry.at + 1 },
      expected: stored.iterations,
      events: [{ event: joined.event, once: `state|${step_id}|${place.iteration}` }],
      stateEntry: joined.entry,
    };
  }

  /**
   * Round `n-1` folded in from its recorded response and the plan recorded with it (never decided
   * again: a deploy between two jobs must not change what was fanned out), with the recorded
   * results in call order.
   */
  private async foldRound(context: StepContext, state: StepState, snapshot: StepSnapshot): Promise<StepState> {
    const { store } = this.deps;
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
        content = (await store.recordToolResult(run_id, roundCall(planned, place, fanned_out), lost))?.content ?? lost.content;
      }
      contents.set(planned.index, content);
    }
    return applyToolRound(state, context.settings, response, calls, contents);
  }

  /**
   * Call `n` to the model, its response recorded once (an earlier delivery's response wins). The
   * calls it fans out are marked open in the same write.
   */
  private async callProvider(
    context: StepContext,
    state: StepState,
    call: PreparedCall,
    job: Job<ProviderJobData>,
    token: string | undefined,
  ): Promise<CalledProvider | undefined> {
    const { store, cancellation } = this.deps;
    const { run_id, step_id, iteration } = context.data;
    const { signal, release } = cancellation.signalFor(run_id);
    // Each delivery and retry is its own attempt on the run's stream (SPEC §12): a later one resets the iteration's text.
    const text = new CallStream(store.streams, { run_id, step_id, iteration, attempt: Math.max(1, job.attemptsStarted) });
    const answer = await callModel(call, { run_id, step_id, iteration }, signal, runStreams(context.spec, context.agent) ? text.onText : undefined).finally(release);
    if ('thrown' in answer) {
      await text.abandon();
      const error = await providerFailed(this.deps, job, token, call, answer.thrown);
      await this.endStep(context, { outcome: { status: 'failed', error }, step_id, events: [{ event: stepFailedEvent(step_id, error) }] });
      return undefined;
    }
    const { response } = answer;
    const events = responseEvents(state, call.provider_id, call.request.model, response, answer.latency_ms);
    // Decided before recording, so the round of calls it fans out is opened in the same write.
    const decision = markApprovals(decideResponse(context.agent, state, context.settings, response, context.spent), { step_id, iteration }, run_id, this.deps.logger);
    const open = decision.type === 'tools' ? decision.calls.filter((planned) => fansOut(planned, context.settings)) : [];
    // A response that ends the run ends it in the same write.
    const ending = context.workflow ? undefined : endingFor(step_id, iteration, decision);
    if (ending?.outcome.status === 'completed') await stageThreadMessages(this.deps.threads, this.deps.store, { run_id, step_id, agent: context.agent }, state, response);
    const recorded = await store.recordResponse(
      run_id,
      step_id,
      iteration,
      {
        response,
        plan: planOf(decision, (planned) => fansOut(planned, context.settings)),
        spent: context.spent,
        // Which of the step's models answered: the agent's own, or a fallback.
        target: { provider_id: call.provider_id, model: call.request.model },
      },
      // A rejected answer's OutputValidationFailed is written with it; a failure's events with the ending.
      [...events, ...(decision.type === 'repair_output' ? decision.events : [])].map((event) => ({ event })),
      open.map((planned) => roundCall(planned, { step_id, iteration }, true)),
      ending,
      executedCalls(decision),
      await text.part(
        response.content ?? '',
        response.tool_calls.map((requested) => [requested.id, requested.function.name]),
      ),
    );
    if (!recorded) return undefined;
    // An earlier delivery's response stands: act on that one, as it was decided.
    if (!recorded.recordedNow) return { recorded: recorded.recorded };
    if (ending) {
      recordRunEnded(recorded.ended, ending);
      await runEnded(store, run_id, this.deps, recorded.ended);
    }
    return { response, decision, ended: ending !== undefined };
  }

  /** Acts on the decision for response `n`. */
  private async act(context: StepContext, decision: ResponseDecision): Promise<void> {
    const { step_id, iteration } = context.data;
    switch (decision.type) {
      case 'complete':
      case 'fail': {
        await this.endStep(context, endingFor(step_id, iteration, decision)!);
        return;
      }
      case 'final_answer':
      case 'repair_output':
        await enqueueNext(this.deps, context, []);
        return;
      case 'tools':
        await runRound(this.deps, context, decision.calls);
    }
  }
}

/** The context with the run state the round it opens starts from (SPEC §17). */
function withRoundState(context: StepContext, state: StepState): StepContext {
  return { ...context, round: roundStateOf(state, context.agent.max_state_bytes) };
}

/** What a provider job's step runs (see `ProviderJobProcessor.resolve`). */
type StepTarget =
  | {
      readonly type: 'agent';
      readonly agent: Agent;
      readonly definition_hash: string;
      readonly config: unknown;
      readonly run: WorkflowRun | undefined;
      readonly step?: WorkflowStep;
    }
  | { readonly type: 'tool'; readonly step: Extract<WorkflowStep, { type: 'tool' }>; readonly run: WorkflowRun }
  | { readonly error: RunError };
