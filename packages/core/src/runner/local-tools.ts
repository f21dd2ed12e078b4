import pLimit, { type LimitFunction } from 'p-limit';
import type { Agent } from '../definitions/agent.ts';
import type { BudgetConfig, ResolvedBudget } from '../definitions/settings.ts';
import { childBudget, childOf } from '../definitions/agent-tool.ts';
import type { RunInput } from '../conversation/messages.ts';
import { ConfigError } from '../errors.ts';
import { silentLogger, stderrLogger } from '../logger.ts';
import { type ApprovalAnswer, answerProblem, approvalRequest, approvalRequestedEvent, approvalResolvedEvent, approvalTimedOutCall, rejectedCall } from '../loop/approvals.ts';
import type { ExecuteCall, PlannedCall } from '../loop/plan.ts';
import { answeredCall, requestedCallFacts, resultRequestedEvent, resultTimedOutCall, toolResultProblem, toolResultRequest } from '../loop/tool-results.ts';
import {
  type CallPlace,
  type ChildEnding,
  type SettledCall,
  cancelledCall,
  childCallSettled,
  settleExecution,
  shouldRetryTool,
  toolStartedEvent,
  TOO_DEEP_MESSAGE,
  tooDeepCall,
} from '../loop/tool-events.ts';
import type { RunSpent } from '../vocabulary/tokens.ts';
import { childRunId } from '../run-record.ts';
import type { ToolDefinition, ToolLogger } from '../tools/define.ts';
import { runHandler, watchSignal } from '../tools/run-handler.ts';
import { type RunState, type StateChange, changesFit, stateSize } from '../state/run-state.ts';
import { backoffMs, sleep } from './backoff.ts';
import type { LocalEventLog } from './event-log.ts';
import type { RunLocalOptions } from './local-options.ts';

const toolLimits = new WeakMap<ToolDefinition, LimitFunction>();

/** How a local run starts the child runs of its agent tools (SPEC §13); `depth` is its own (0 without a parent). */
export interface LocalChildren {
  readonly depth: number;
  /** What the run has spent so far, its children's spend included. */
  readonly spent: RunSpent;
  /** Runs a child to its end (cancelled with `signal`) under `budget`; what it spent counts toward this run's budget. */
  run(
    agent: Agent,
    input: RunInput,
    run_id: string,
    parent: { readonly tool_call_id: string },
    signal: AbortSignal | undefined,
    budget: BudgetConfig | undefined,
  ): Promise<ChildEnding>;
}

/** Tool executions of a local run: retries, timeouts, cancellation and the run's and each tool's concurrency caps. */
export class LocalTools {
  private readonly limitRun: LimitFunction;
  readonly logger: ToolLogger;
  /** Each step's state as its current round began, and its limit (SPEC §17). */
  private readonly roundStates = new Map<string, { readonly state: RunState; readonly state_size: number; readonly max_state_bytes: number }>();
  /** Each agent step's budget, which its children's budgets come from (SPEC §13). */
  private readonly stepBudgets = new Map<string, ResolvedBudget | undefined>();
  /** The state changes of completed calls not joined yet, by step, then call id (with the call's place in its round). */
  private readonly changes = new Map<string, Map<string, { readonly index: number; readonly changes: readonly StateChange[] }>>();

  constructor(
    private readonly log: LocalEventLog,
    private readonly options: RunLocalOptions,
    private readonly children: LocalChildren,
  ) {
    this.logger = options.logger === false ? silentLogger : (options.logger ?? stderrLogger('arcflow.local'));
    this.limitRun = pLimit(options.tool_concurrency ?? 16);
  }

  /** The state the step's next round's calls see, and (an agent step's) the budget its children's come from. */
  beginRound(step_id: string, state: RunState, max_state_bytes: number, budget?: ResolvedBudget): void {
    this.roundStates.set(step_id, { state, state_size: stateSize(state), max_state_bytes });
    this.stepBudgets.set(step_id, budget);
  }

  /** The changes of the round's completed calls, in call order; taken once. */
  takeChanges(step_id: string, calls: readonly PlannedCall[]): StateChange[] {
    const taken: StateChange[] = [];
    const recorded = this.changes.get(step_id);
    for (const planned of calls) {
      taken.push(...(recorded?.get(planned.call.id)?.changes ?? []));
      recorded?.delete(planned.call.id);
    }
    return taken;
  }

  /** Runs the call under the run's and the tool's concurrency caps; resolves with what the model sees. */
  limited(planned: ExecuteCall, place: CallPlace, signal: AbortSignal | undefined): Promise<string> {
    // An external tool's call waits for its result from outside, holding no slot.
    if (planned.tool.external) return this.execute(planned, place, signal);
    return this.limitRun(() => limitFor(planned.tool)(() => this.execute(planned, place, signal)));
  }

  /** Runs the call to its terminal event (retrying under the tool's `retries`); resolves with what the model sees. */
  async execute(planned: ExecuteCall, place: CallPlace, signal: AbortSignal | undefined): Promise<string> {
    return (await this.settle(planned, place, signal)).content;
  }

  /**
   * As {@link execute}, with the terminal event too. `canWait` false (a workflow's tool step): a
   * handler that defers fails the call (`tool_error`), as on the queue engine, where a tool step
   * has no round to wait in.
   */
  async settle(planned: ExecuteCall, place: CallPlace, signal: AbortSignal | undefined, canWait = true): Promise<SettledCall> {
    if (childOf(planned.tool)) return this.settleChild(planned, place, signal);
    const started = performance.now();
    if (planned.tool.external) return this.awaitResult(planned, place, signal, planned.tool.result_timeout_ms, undefined, started);
    for (let attempt = 1; ; attempt += 1) {
      if (signal?.aborted) return this.record(cancelledCall(planned, place, elapsed(started)));
      this.log.append(toolStartedEvent(planned, place, attempt));
      const outcome = await runHandler(planned.tool, {
        run_id: this.log.run_id,
        ...place,
        tool_call_id: planned.call.id,
        attempt,
        args: planned.args,
        ...(signal ? { cancel: watchSignal(signal) } : {}),
        log: this.logger,
        ...this.roundStates.get(place.step_id),
      });
      if (outcome.status === 'error') {
        this.logger.error('tool handler failed', { run_id: this.log.run_id, ...place, tool_call_id: planned.call.id, tool: planned.tool.name, attempt, error: outcome.error });
      }
      if (outcome.status === 'deferred' && canWait) return this.awaitResult(planned, place, signal, outcome.timeout_ms, outcome.changes, started);
      if (outcome.status === 'deferred') {
        this.logger.error('a workflow tool step deferred: a tool step cannot wait for a result from outside', { run_id: this.log.run_id, ...place, tool: planned.tool.name });
      }
      if (shouldRetryTool(outcome, attempt, planned.tool.retries)) {
        await sleep(backoffMs(attempt, this.options.tool_retry_backoff_ms ?? 200, 10_000), signal);
        continue;
      }
      return this.record(this.withChanges(planned, place, settleExecution(planned, place, outcome, elapsed(started)), started));
    }
  }

  /** A completed call's state changes are kept for the join if they fit (SPEC §17); else the call fails `state_too_large`. */
  private withChanges(planned: ExecuteCall, place: CallPlace, settled: SettledCall, started: number): SettledCall {
    if (!settled.changes) return settled;
    if (this.changesFit(planned, place.step_id, settled.changes)) {
      this.keepChanges(planned, place.step_id, settled.changes);
      return settled;
    }
    return settleExecution(planned, place, { status: 'state_too_large' }, elapsed(started));
  }

  /**
   * A call that waits for its result from outside (SPEC §20): `ToolResultRequested`, then the
   * run's `toolResult` option answers within `timeout_ms` (without one, the call fails
   * `result_timeout` at once). An output the tool's `output_schema` refuses is logged and the
   * call goes on waiting: `toolResult` is asked again.
   */
  private async awaitResult(
    planned: ExecuteCall,
    place: CallPlace,
    signal: AbortSignal | undefined,
    timeout_ms: number,
    changes: SettledCall['changes'],
    started: number,
  ): Promise<SettledCall> {
    this.log.append(resultRequestedEvent(requestedCallFacts(planned), place, Date.now() + timeout_ms));
    const call = { tool_name: planned.tool.name, tool_call_id: planned.call.id, max_result_bytes: planned.tool.max_result_bytes };
    const ask = this.options.toolResult;
    if (!ask) return this.record(resultTimedOutCall(call, place, elapsed(started)));
    const deadline = Date.now() + timeout_ms;
    for (;;) {
      const answer = await waitOutside(() => ask(toolResultRequest(planned, place)), deadline - Date.now(), signal);
      if (answer === 'cancelled') return this.record(cancelledCall(planned, place, elapsed(started)));
      if (answer === 'timeout') return this.record(resultTimedOutCall(call, place, elapsed(started)));
      const problem = toolResultProblem(answer);
      if (problem) throw new ConfigError(`runLocal: toolResult answered for call '${planned.call.id}' with a bad result: ${problem}`);
      const violation = 'output' in answer ? planned.tool.checkOutput(answer.output) : undefined;
      if (violation === undefined) return this.record(this.withChanges(planned, place, answeredCall(call, place, answer, elapsed(started), changes), started));
      this.logger.warn("toolResult answered with an output the tool's output_schema refuses; the call goes on waiting", {
        run_id: this.log.run_id,
        ...place,
        tool_call_id: planned.call.id,
        tool: planned.tool.name,
        violation,
      });
    }
  }

  /** Whether the round's state, with the changes its completed calls kept so far and the call's own, in call order, fits (SPEC §17). */
  private changesFit(planned: ExecuteCall, step_id: string, own: readonly StateChange[]): boolean {
    const round = this.roundStates.get(step_id);
    if (!round) return true;
    const kept = [...(this.changes.get(step_id)?.values() ?? []), { index: planned.index, changes: own }].sort((a, b) => a.index - b.index);
    return changesFit(
      round.state,
      round.state_size,
      kept.map((entry) => entry.changes),
      round.max_state_bytes,
    );
  }

  private keepChanges(planned: ExecuteCall, step_id: string, changes: readonly StateChange[]): void {
    const recorded = this.changes.get(step_id) ?? new Map();
    this.changes.set(step_id, recorded);
    recorded.set(planned.call.id, { index: planned.index, changes });
  }

  /** A call of an agent tool: a child run of its agent, whose end is the call's result; deeper than `max_depth`, a tool error. */
  private async settleChild(planned: ExecuteCall, place: CallPlace, signal: AbortSignal | undefined): Promise<SettledCall> {
    const { agent, max_depth, input } = childOf(planned.tool)!;
    const call = { tool_name: planned.tool.name, tool_call_id: planned.call.id, max_result_bytes: planned.tool.max_result_bytes };
    if (this.children.depth + 1 > max_depth) {
      this.logger.error(TOO_DEEP_MESSAGE, { run_id: this.log.run_id, ...place, tool_call_id: planned.call.id, tool: planned.tool.name, max_depth });
      this.log.append(toolStartedEvent(planned, place, 1));
      return this.record(tooDeepCall(planned, place));
    }
    const child_run_id = childRunId(this.log.run_id, place.step_id, place.iteration, planned.call.id);
    this.log.append(toolStartedEvent(planned, place, 1, child_run_id));
    const started = performance.now();
    const budget = childBudget(this.stepBudgets.get(place.step_id), this.children.spent, agent.budget);
    const ending = await this.children.run(agent, input(planned.args), child_run_id, { tool_call_id: planned.call.id }, signal, budget);
    if (signal?.aborted) return this.record(cancelledCall(planned, place, elapsed(started)));
    return this.record(childCallSettled(call, place, ending, elapsed(started)));
  }

  /**
   * A call that needs approval: `ToolApprovalRequested`, then the run's `approve` option answers
   * (without one, the call is rejected with the reason `no approver`) within the tool's
   * `approval_timeout_ms`; approved, it runs like any call.
   */
  async afterApproval(planned: ExecuteCall, place: CallPlace, signal: AbortSignal | undefined, limited: boolean): Promise<string> {
    const refused = await this.askApproval(planned, place, signal);
    if (refused) return refused.content;
    return limited ? this.limited(planned, place, signal) : this.execute(planned, place, signal);
  }

  /** A workflow tool step's call that needs approval: as {@link afterApproval}, to its terminal event (see {@link settle}'s `canWait`). */
  async settleAfterApproval(planned: ExecuteCall, place: CallPlace, signal: AbortSignal | undefined): Promise<SettledCall> {
    return (await this.askApproval(planned, place, signal)) ?? this.settle(planned, place, signal, false);
  }

  /** Asks for approval; resolves with the settled call when it is not approved (rejected, timed out, cancelled), else undefined. */
  private async askApproval(planned: ExecuteCall, place: CallPlace, signal: AbortSignal | undefined): Promise<SettledCall | undefined> {
    this.log.append(approvalRequestedEvent(planned, place));
    const approve = this.options.approve ?? ((): ApprovalAnswer => ({ approved: false, reason: 'no approver' }));
    const answer = await waitOutside(() => approve(approvalRequest(planned, place)), planned.tool.approval_timeout_ms, signal);
    const ids = { tool_name: planned.tool.name, tool_call_id: planned.call.id };
    if (answer === 'cancelled') return this.record(cancelledCall(planned, place));
    if (answer === 'timeout') return this.record(approvalTimedOutCall(ids, place));
    const problem = answerProblem(answer);
    if (problem) throw new ConfigError(`runLocal: approve answered for call '${planned.call.id}' with a bad answer: ${problem}`);
    this.log.append(approvalResolvedEvent(ids, place, answer.approved, answer.by));
    return answer.approved ? undefined : this.record(rejectedCall(ids, place, answer.reason));
  }

  private record(settled: SettledCall): SettledCall {
    this.log.append(settled.terminal);
    return settled;
  }
}

/**
 * A local call that waits for something outside (SPEC §10, §20): the answer `ask` gives, or
 * `timeout` after `timeout_ms`, or `cancelled` when the run's signal aborts first.
 */
async function waitOutside<T>(ask: () => T | Promise<T>, timeout_ms: number, signal: AbortSignal | undefined): Promise<T | 'timeout' | 'cancelled'> {
  if (signal?.aborted) return 'cancelled';
  let timer: NodeJS.Timeout | undefined;
  let stop: (() => void) | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), Math.max(0, timeout_ms))));
  const cancelled = new Promise<'cancelled'>((resolve) => {
    const onAbort = () => resolve('cancelled');
    signal?.addEventListener('abort', onAbort, { once: true });
    stop = () => signal?.removeEventListener('abort', onAbort);
  });
  try {
    const answer = await Promise.race([Promise.resolve().then(ask), timedOut, cancelled]);
    return signal?.aborted ? 'cancelled' : answer;
  } finally {
    clearTimeout(timer);
    stop?.();
  }
}

function elapsed(started: number): number {
  return Math.round(performance.now() - started);
}

/** A tool's `concurrency` caps its executions in this process across local runs. */
function limitFor(tool: ToolDefinition): LimitFunction {
  let limit = toolLimits.get(tool);
  if (!limit) {
    limit = pLimit(tool.concurrency ?? Number.POSITIVE_INFINITY);
    toolLimits.set(tool, limit);
  }
  return limit;
}
