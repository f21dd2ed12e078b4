import {
  type CallPlace,
  DEFAULT_MAX_STATE_BYTES,
  type ExecuteCall,
  type ToolDefinition,
  childRunId,
  ToolResultText,
  lostCall,
  plannedCallEvents,
  toolDefinitionHash,
  unrepresentableArguments,
} from '@arcflow/core';
import { childOf } from '@arcflow/core';
import type { Job } from 'bullmq';
import { type ToolJobData, attemptsOf, joinJobData, malformedJobData } from '../jobs/jobs.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import { type ChildRunDeps, startChildCall } from './waiting/child-runs.ts';
import { type AttemptOutcome, type ToolRuntime, attemptToolCall, callFromJob, roundCall } from './tool-execution.ts';
import { countedLosses, watchGrace } from './tool-losses.ts';
import { deferCall } from './waiting/tool-results.ts';
import { toolStepEnding } from '../workflows/tool-step.ts';
import type { WorkflowDirectory, WorkflowScheduler } from '../workflows/workflow-scheduler.ts';

export interface ToolJobDeps extends ToolRuntime, ChildRunDeps {
  readonly tools: ReadonlyMap<string, ToolDefinition>;
  readonly queues: Dispatcher;
  readonly scheduler: WorkflowScheduler;
  /** Workflows as registered: a tool step's job settles its step with the graph found there. */
  readonly workflows: WorkflowDirectory;
  /** A call's loss budget: how many deliveries lost past their grace it takes before it ends `worker_lost`. */
  readonly max_stalled_count: number;
}

/**
 * Processes a tool job: one attempt at one call. A handler error with attempts left is thrown,
 * so BullMQ retries with backoff; everything else is recorded once and the job completes. A
 * re-delivered job whose call is already recorded runs nothing. Whichever job sees its round
 * settled enqueues the join, before the job completes: a crash in between re-delivers the job,
 * which sees the round settled again.
 */
export function toolJobProcessor(deps: ToolJobDeps) {
  return async (job: Job<ToolJobData>): Promise<string> => {
    const data = job.data;
    const malformed = malformedJobData(data);
    if (malformed) {
      // Not a job this engine wrote (anyone with Redis access can add one): nothing to run or record.
      deps.logger.error('tool job refused: its data is malformed', { job_id: job.id, problem: malformed });
      return 'refused';
    }
    const tool = servedTool(deps, data);
    const planned = callFromJob(data, tool);
    const place = { step_id: data.step_id, iteration: data.iteration };
    // What runs is what a schema checked, whoever added the job.
    const violation = argumentViolation(tool, data.args);
    if (violation !== undefined) {
      await refuseArguments(deps, data, planned, place, violation);
      return 'refused';
    }
    // attemptsStarted counts every delivery, so a call re-run after a crash shows a higher attempt.
    const attempt = Math.max(job.attemptsStarted, job.attemptsMade + 1);
    if (childOf(tool)) {
      // An agent tool's call starts a child run and stays open until the child ends (SPEC §13).
      const { roundSettled } = await startChildCall(deps, data, planned, attempt);
      if (roundSettled) await joinRound(deps, data);
      return 'child';
    }
    // A call whose handler deferred before (the job was re-delivered after its call was parked) waits: its handler does not run again.
    if (attempt > 1 && (await deps.store.toolResults.statusAt(data.run_id, data.tool_call_id, place)) !== undefined) return 'deferred';
    // Only deliveries lost after their handler ran past the grace count against the call (tool-losses.ts).
    if (countedLosses(job, attempt) > deps.max_stalled_count) {
      await settleFailedToolJob(deps, job, true);
      return 'lost';
    }
    const outcome = await attemptJobCall(deps, job, planned, place, attempt);
    return await afterAttempt(deps, data, planned, place, outcome);
  };
}

/** The tool a job names, as this worker serves it: the definition the call was planned with, or the job fails. */
function servedTool(deps: ToolJobDeps, data: ToolJobData): ToolDefinition {
  const tool = deps.tools.get(data.tool_name);
  if (!tool) throw new Error(`this worker does not serve tool '${data.tool_name}'`);
  // Queues are per definition, so this holds for every job the engine added: a handler of another definition never runs a call.
  if (toolDefinitionHash(tool) !== data.definition_hash) {
    throw new Error(`this worker holds another definition of tool '${data.tool_name}' (${toolDefinitionHash(tool)}, the call was planned with ${data.definition_hash})`);
  }
  return tool;
}

/** A job whose arguments fail the schema: its call is recorded as rejected, and its handler never runs. */
async function refuseArguments(deps: ToolJobDeps, data: ToolJobData, planned: ExecuteCall, place: CallPlace, violation: string): Promise<void> {
  const tool = planned.tool;
  deps.logger.error('tool job refused: its arguments fail the schema', {
    run_id: data.run_id,
    step_id: data.step_id,
    iteration: data.iteration,
    tool_call_id: data.tool_call_id,
    tool: tool.name,
  });
  const rejected = {
    ...planned,
    action: 'reject' as const,
    content: ToolResultText.invalidArguments(violation),
    reason: { type: 'invalid_arguments' as const, tool, violation, input_size_bytes: data.input_size_bytes },
  };
  const [started, terminal] = plannedCallEvents(rejected, place);
  const recorded = await deps.store.recordToolResult(data.run_id, roundCall(planned, place, true, data.waits === true), {
    content: rejected.content,
    terminal: terminal!,
    started: { event: started!, ts: Date.now() },
  });
  if (recorded?.openInRound === 0) await joinRound(deps, data);
}

/** The job's attempt at its call, watched for the grace after which a lost delivery counts against it. */
async function attemptJobCall(deps: ToolJobDeps, job: Job<ToolJobData>, planned: ExecuteCall, place: CallPlace, attempt: number): Promise<AttemptOutcome> {
  const data = job.data;
  const attempts = attemptsOf(job);
  const grace = watchGrace(job, attempt, deps.logger);
  try {
    return await attemptToolCall(
      deps,
      data.run_id,
      planned,
      place,
      {
        number: attempt,
        last: job.attemptsMade + 1 >= attempts,
        firstDelivery: attempt === 1,
        fannedOut: true,
        roundWaits: data.waits === true,
        job: { queue: job.queueName, id: job.id, attemptsStarted: job.attemptsStarted, from: data.trace.from },
      },
      { entries: data.state_entries ?? 0, max_state_bytes: data.max_state_bytes ?? DEFAULT_MAX_STATE_BYTES, ...(data.state_step ? { log_step: data.state_step } : {}) },
    );
  } finally {
    await grace.end();
  }
}

/** What the job does once its attempt is over: park a deferred call, throw for a retry, or join a settled round. */
async function afterAttempt(deps: ToolJobDeps, data: ToolJobData, planned: ExecuteCall, place: CallPlace, outcome: AttemptOutcome): Promise<string> {
  if (outcome.deferred && data.workflow) {
    // A workflow's tool step has no round to wait in: the deferral fails it, as in runLocal.
    deps.logger.error('a workflow tool step deferred: a tool step cannot wait for a result from outside', { run_id: data.run_id, step_id: data.step_id, tool: data.tool_name });
    const recorded = await deps.store.recordToolResult(data.run_id, roundCall(planned, place, true, data.waits === true), lostCall(planned, place));
    if (recorded?.openInRound === 0) await joinRound(deps, data);
    return 'recorded';
  }
  if (outcome.deferred) {
    await deferCall(deps, planned, place, data, outcome.deferred);
    return 'deferred';
  }
  const { retry, roundSettled } = outcome;
  if (retry) throw new Error(`tool '${data.tool_name}' failed; retrying`);
  if (roundSettled) await joinRound(deps, data);
  return 'recorded';
}

/**
 * A tool job that BullMQ failed for good without recording its call: the call gets its failure
 * result, so the round can settle. A job that lost its worker more often than the stall limit
 * allows ends `worker_lost`; one whose recording kept failing, `tool_error`.
 */
export async function settleFailedToolJob(deps: ToolJobDeps, job: Job<ToolJobData>, lostWorker: boolean): Promise<void> {
  const data = job.data;
  const tool = deps.tools.get(data.tool_name);
  if (!tool) return;
  // A child that was started settles the call when it ends (or the watchdog does): its result is not lost here.
  if (childOf(tool) && (await deps.store.status(childRunId(data.run_id, data.step_id, data.iteration, data.tool_call_id)))) return;
  const place = { step_id: data.step_id, iteration: data.iteration };
  const planned = callFromJob(data, tool);
  const lost = lostCall(planned, place, lostWorker ? 'worker_lost' : 'tool_error');
  const recorded = await deps.store.recordToolResult(data.run_id, roundCall(planned, place, true, data.waits === true), lost);
  if (recorded?.openInRound === 0) await joinRound(deps, data);
}

/**
 * The round of this tool job is settled: on to its join, provider job `n+1`. A workflow's tool
 * step is its own join: the step is settled here and the workflow moves on (its job 2 does it
 * instead if the workflow is not registered).
 */
async function joinRound(deps: ToolJobDeps, data: ToolJobData): Promise<void> {
  const run = data.workflow ? await deps.workflows.run(data.workflow, data.run_id, data.trace) : undefined;
  if (!run) return deps.queues.join(data.join, joinJobData(data));
  const result = await deps.store.workflows.toolStepResult(data.run_id, data.step_id);
  await deps.scheduler.settle(run, toolStepEnding(data.step_id, data.tool_name, result));
}

/** Why a job's arguments may not reach the handler: not plain JSON, or not what the tool's schema admits. */
function argumentViolation(tool: ToolDefinition, args: unknown): string | undefined {
  return unrepresentableArguments(args) ?? tool.check(args);
}
