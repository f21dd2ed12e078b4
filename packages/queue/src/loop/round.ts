import type { Agent, CallPlace, ExecuteCall, PlannedCall, RunSpent, StepSettings, TestStep } from '@arcflow/core';
import { DEFAULT_MAX_STATE_BYTES, backoffMs, childOf, modelTargets, plannedCallEvents, toolDefinitionHash } from '@arcflow/core';
import type { Span } from '@opentelemetry/api';
import { childCarrier } from '../tracing.ts';
import { QueueName } from '../redis/keys.ts';
import type { RunSpec } from '../records/run-spec.ts';
import { runStreams } from '../streams/run-streams.ts';
import { requestApproval } from '../calls/waiting/approvals.ts';
import { requestResult } from '../calls/waiting/tool-results.ts';
import { type JoinTarget, type ProviderJobData, type ToolJobData, providerAttempts } from '../jobs/jobs.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { RoundState } from './state-join.ts';
import type { ResolvedWorkerOptions } from '../config/options.ts';
import { type ToolRuntime, attemptToolCall, roundCall } from '../calls/tool-execution.ts';
import type { WorkflowRun } from '../workflows/workflow-scheduler.ts';

/** What a round needs of the worker: the store, its options and queues, and what running a tool inline takes. */
export interface RoundDeps extends ToolRuntime {
  readonly options: ResolvedWorkerOptions;
  readonly queues: Dispatcher;
}

/** A step as its provider job sees it (see `ProviderJobProcessor.process`). */
export interface StepContext {
  readonly spec: RunSpec;
  readonly agent: Agent;
  /** Set when the step is one of a workflow run's: its end settles the step instead of ending the run. */
  readonly workflow: WorkflowRun | undefined;
  readonly settings: StepSettings;
  readonly test: TestStep | undefined;
  readonly data: ProviderJobData;
  /** This job's span: the creator of the jobs it enqueues. */
  readonly span: Span;
  /** What the whole run had spent when this job read it: the budget's view for a response decided now. */
  readonly spent: RunSpent;
  /** The run state the round this job opens starts from (SPEC §17); set once the step's state is ready. */
  readonly round?: RoundState;
}

/** A call counted among its round's open calls: one that runs as its own tool job (not under legacy_eager), or waits outside any worker. */
export function fansOut(planned: PlannedCall, settings: StepSettings): boolean {
  return planned.action === 'execute' && (settings.mode === 'llm_select' || waitsOutside(planned));
}

/** A call that waits holding no worker, in either mode: for a person's approval, a result from outside (SPEC §20), or the child run it starts (SPEC §13). */
function waitsOutside(planned: ExecuteCall): boolean {
  return planned.approval === true || planned.tool.external || childOf(planned.tool) !== undefined;
}

/**
 * Answers rejected and repeated calls at once and fans the valid ones out as tool jobs; under
 * legacy_eager, runs the valid ones inline instead, each in the model's order with the answers
 * of the rejected ones between them (SPEC §3).
 */
export async function runRound(deps: RoundDeps, context: StepContext, calls: readonly PlannedCall[]): Promise<void> {
  const { run_id, step_id, iteration } = context.data;
  const place = { step_id, iteration };
  const eager = context.settings.mode === 'legacy_eager';
  for (const planned of calls) {
    if (planned.action !== 'execute') await answerAtOnce(deps.store, run_id, planned, place);
    else if (eager && !waitsOutside(planned)) await runInline(deps, run_id, planned, place, context.round);
  }
  const executable = calls.filter((planned): planned is ExecuteCall => planned.action === 'execute');
  // Under legacy_eager, calls waiting for approval or a child run wait as in llm_select: the round joins once they are settled.
  await enqueueNext(deps, context, eager ? executable.filter(waitsOutside) : executable);
}

/** A rejected or repeated call's events and answer, written once. */
async function answerAtOnce(store: RoundDeps['store'], run_id: string, planned: Exclude<PlannedCall, ExecuteCall>, place: CallPlace): Promise<void> {
  const events = plannedCallEvents(planned, place);
  const once = (index: number) => `plan|${place.step_id}|${place.iteration}|${planned.call.id}|${index}`;
  if (planned.action === 'repeat') {
    await store.append(
      run_id,
      events.map((event, index) => ({ event, once: once(index) })),
    );
    return;
  }
  await store.append(
    run_id,
    events.slice(0, -1).map((event, index) => ({ event, once: once(index) })),
  );
  await store.recordToolResult(run_id, roundCall(planned, place, false), { content: planned.content, terminal: events.at(-1)! });
}

/** legacy_eager: the provider job runs the call itself, retrying inline under the tool's `retries`. */
async function runInline(deps: RoundDeps, run_id: string, planned: ExecuteCall, place: CallPlace, round: RoundState | undefined): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    const { retry } = await attemptToolCall(deps, run_id, planned, place, { number: attempt, last: attempt > planned.tool.retries, firstDelivery: false, fannedOut: false }, round);
    if (!retry) return;
    await new Promise((resolve) => setTimeout(resolve, backoffMs(attempt, deps.options.tool_backoff_ms, 10_000)));
  }
}

/**
 * Fans the round's valid calls out as tool jobs, each carrying provider job `n+1` as its join;
 * with none, enqueues provider job `n+1` now. Job ids are deterministic, so a re-delivered
 * provider job adds nothing twice.
 */
export async function enqueueNext(deps: RoundDeps, context: StepContext, calls: readonly ExecuteCall[]): Promise<void> {
  const { options, queues } = deps;
  const { run_id, step_id, iteration } = context.data;
  const trace = childCarrier(context.data.trace, context.span);
  // A workflow step's jobs stay on the workflow's queue: only workers serving the workflow take them.
  // Each of the step's models gets the configured attempts (SPEC §16).
  const join: JoinTarget = {
    queue: context.workflow?.queue.queue ?? QueueName.agent(context.agent.name),
    attempts: providerAttempts(options.provider_attempts, modelTargets(context.agent, context.settings).length),
  };
  if (calls.length === 0) {
    await queues.join(join, { run_id, step_id, iteration: iteration + 1, trace });
    return;
  }
  // One `add` per job, all in this tick (one socket write; see `Dispatcher.addToolJob`).
  const waits = calls.some((planned) => planned.approval || planned.tool.external);
  await Promise.all(
    calls.map((planned) => {
      const data: ToolJobData = {
        run_id,
        step_id,
        iteration,
        index: planned.index,
        tool_call_id: planned.call.id,
        tool_name: planned.tool.name,
        definition_hash: toolDefinitionHash(planned.tool),
        args: planned.args,
        input_size_bytes: planned.input_size_bytes,
        trace,
        join,
        ...(waits ? { waits: true } : {}),
        ...stateFields(context.round),
        // A child run streams when its parent does (SPEC §12).
        ...(childOf(planned.tool) ? { ...budgetField(context.settings), stream: runStreams(context.spec, context.agent) } : {}),
      };
      if (planned.approval)
        return requestApproval({ store: deps.store, queues, tool_backoff_ms: options.tool_backoff_ms, logger: deps.logger }, planned, { step_id, iteration }, data);
      // An external tool's call is never executed: it waits for its result from outside (SPEC §20).
      if (planned.tool.external) return requestResult({ store: deps.store, queues }, planned, { step_id, iteration }, data);
      return queues.addToolJob(planned.tool, data, options.tool_backoff_ms);
    }),
  );
}

/** An agent tool's job's `budget`: the step's caps, when it has any (its child's budget comes from them). */
function budgetField(settings: StepSettings): Pick<ToolJobData, 'budget'> {
  const { max_total_tokens, max_tool_calls, max_cost_usd } = settings.budget ?? {};
  if (max_total_tokens === undefined && max_tool_calls === undefined && max_cost_usd === undefined) return {};
  return {
    budget: {
      ...(max_total_tokens !== undefined ? { max_total_tokens } : {}),
      ...(max_tool_calls !== undefined ? { max_tool_calls } : {}),
      ...(max_cost_usd !== undefined ? { max_cost_usd } : {}),
    },
  };
}

/** A tool job's run-state fields (SPEC §17): present only when its run has a state, or a limit of its own. */
function stateFields(round: RoundState | undefined): Pick<ToolJobData, 'state_entries' | 'max_state_bytes'> {
  if (!round) return {};
  return {
    ...(round.entries > 0 ? { state_entries: round.entries } : {}),
    ...(round.max_state_bytes !== DEFAULT_MAX_STATE_BYTES ? { max_state_bytes: round.max_state_bytes } : {}),
  };
}
