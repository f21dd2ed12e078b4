import {
  type BudgetConfig,
  checkExecConfig,
  childExecConfig,
  type ExecuteCall,
  TERMINAL_STATUSES,
  childBudget,
  childOf,
  type ToolLogger,
  TOO_DEEP_MESSAGE,
  type RunStatus,
  childRunId,
  modelTargets,
  tooDeepCall,
  toolStartedEvent,
} from '@arcflow/core';
import type { Redis } from 'ioredis';
import { QueueName } from '../../redis/keys.ts';
import type { RunStore } from '../../runs/run-store.ts';
import { type RunTrace, childCallTraceparent, firstJobCarrier, mintChildTrace } from '../../tracing.ts';
import { settleParentOf } from '../../runs/end-run.ts';
import { cancelChild } from '../../runs/cancel.ts';
import { type ToolJobData, providerAttempts } from '../../jobs/jobs.ts';
import type { Dispatcher } from '../../jobs/dispatcher.ts';
import { type AttemptOutcome, roundCall } from '../tool-execution.ts';

export interface ChildRunDeps {
  readonly store: RunStore;
  readonly queues: Dispatcher;
  readonly redis: Redis;
  readonly logger: ToolLogger;
  /** Attempts per model of a provider job (the worker's `provider_attempts`), for the child's first job. */
  readonly provider_attempts: number;
}

/**
 * A tool job of an agent tool (SPEC §13): starts the call's child run and leaves the call open,
 * holding no worker; the child's end settles it (`settleParentCall`). The child's id comes from the
 * call, and its `ToolCallStarted` is written once, before the child exists: every delivery of the
 * job finds the same child, so a call starts one child whatever re-deliveries happen. A call
 * deeper than the tool's `max_depth` fails at once (`tool_error`).
 */
export async function startChildCall(deps: ChildRunDeps, data: ToolJobData, planned: ExecuteCall, attempt: number): Promise<AttemptOutcome> {
  const { store } = deps;
  const { max_depth } = childOf(planned.tool)!;
  const place = { step_id: data.step_id, iteration: data.iteration };
  const call = roundCall(planned, place, true, data.waits === true);
  const standing = await store.children.standing(data.run_id);
  const depth = standing.depth + 1;
  if (depth > max_depth) return refuseTooDeep(deps, data, planned, attempt, depth);
  const child_run_id = childRunId(data.run_id, data.step_id, data.iteration, data.tool_call_id);
  const started = { event: toolStartedEvent(planned, place, attempt, child_run_id), ts: Date.now() };
  const start = await store.startToolCall(data.run_id, call, started, `start|${data.step_id}|${data.iteration}|${data.tool_call_id}|child`);
  if (start.status === 'ended') {
    // The parent ended: a child an earlier delivery made before dying is cancelled (nothing when there is none).
    await cancelChild(deps.redis, store, deps.queues, child_run_id);
    return { retry: false, roundSettled: false };
  }
  if (start.status === 'recorded') return { retry: false, roundSettled: start.openInRound === 0 };
  const budget = childBudget(data.budget, standing.spent, childOf(planned.tool)!.agent.budget);
  const status = await createChild(deps, data, planned, { child_run_id, depth, started_at: started.ts, budget });
  // A re-delivery that finds the child ended (its ending process died before settling the call) settles it now.
  if (TERMINAL_STATUSES.has(status)) await settleParentOf(store, deps.queues, child_run_id, false);
  // A cancel of the parent between the call's start and the child's creation found no child to cancel: this one is.
  else if (TERMINAL_STATUSES.has((await store.status(data.run_id)) as RunStatus)) await cancelChild(deps.redis, store, deps.queues, child_run_id);
  // The call waits for its child, holding no worker: a run whose every open call waits outside is off the watchdog's scan.
  else await store.children.waitFor(data.run_id, place, data.tool_call_id);
  return { retry: false, roundSettled: false };
}

/** A call deeper than its tool's `max_depth`: a tool error (SPEC §13); the model reads what any tool error gives it, the log says why. */
async function refuseTooDeep(deps: ChildRunDeps, data: ToolJobData, planned: ExecuteCall, attempt: number, depth: number): Promise<AttemptOutcome> {
  const place = { step_id: data.step_id, iteration: data.iteration };
  deps.logger.error(TOO_DEEP_MESSAGE, {
    run_id: data.run_id,
    ...place,
    tool_call_id: data.tool_call_id,
    tool: planned.tool.name,
    depth,
    max_depth: childOf(planned.tool)!.max_depth,
  });
  const started = { event: toolStartedEvent(planned, place, attempt), ts: Date.now() };
  const recorded = await deps.store.recordToolResult(data.run_id, roundCall(planned, place, true, data.waits === true), { ...tooDeepCall(planned, place), started });
  return { retry: false, roundSettled: recorded?.openInRound === 0 };
}

/**
 * Creates the call's child run, in the parent's trace, and adds its first job; a run that exists
 * (an earlier delivery made it) is left as it is, and gets its first job only if it never started.
 * Returns the child's status.
 */
async function createChild(
  deps: ChildRunDeps,
  data: ToolJobData,
  planned: ExecuteCall,
  child: { child_run_id: string; depth: number; started_at: number; budget: BudgetConfig | undefined },
): Promise<RunStatus> {
  const { agent, input } = childOf(planned.tool)!;
  const trace = mintChildTrace(
    data.trace.traceparent,
    childCallTraceparent(data.trace.traceparent, { step_id: data.step_id, iteration: data.iteration, tool_call_id: data.tool_call_id }),
  );
  const { args: _args, ...job } = data;
  const { created } = await deps.store.createRun(
    {
      run_id: child.child_run_id,
      agent: agent.name,
      input: input(data.args),
      // What its parent's budget leaves (SPEC §13); nothing else of the parent's config.
      config: child.budget ? { budget: child.budget } : undefined,
      // A child of a run in test mode runs in test mode too, and never calls a real provider (SPEC §13).
      exec_config: childExecConfig(checkExecConfig((await deps.store.getSpec(data.run_id))?.exec_config), agent.name),
      trace,
      definition_hash: agent.definition_hash,
      ...(data.stream !== undefined ? { stream: data.stream } : {}),
      // A child run is its parent's tenant's, at its parent's priority (SPEC §14).
      ...(await deps.queues.fair.inherited(data.run_id)),
      lineage: { parent: { job, started_at: child.started_at, max_result_bytes: planned.tool.max_result_bytes }, depth: child.depth },
    },
    undefined,
    { kind: 'RunEnqueued', step_id: 's1', agent: agent.name },
  );
  const spec = created ? undefined : await deps.store.getSpec(child.child_run_id);
  if (created || spec?.status === 'queued') {
    // A re-delivery after a crash completes what the first delivery began (the job id dedupes).
    const runTrace = spec?.trace.traceparent ? (spec.trace as RunTrace) : trace;
    const target = { queue: QueueName.agent(agent.name), attempts: providerAttempts(deps.provider_attempts, modelTargets(agent, agent.settings).length) };
    await deps.queues.startStep(target, { run_id: child.child_run_id, step_id: 's1', iteration: 1, trace: firstJobCarrier(runTrace) });
  }
  return spec?.status ?? 'queued';
}
