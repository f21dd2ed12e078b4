import type { Agent } from '../definitions/agent.ts';
import type { StepSettings } from '../definitions/settings.ts';
import type { RunInput } from '../conversation/messages.ts';
import { PROVIDER_RETRY_DEFAULTS } from '../defaults.ts';
import { ConfigError } from '../errors.ts';
import { markApprovals } from '../loop/approvals.ts';
import { applyFinalAnswerNote, applyToolRound, buildRequest, decideResponse, decidedEvents, executedCalls, requestSentEvent, responseEvents, usageWith } from '../loop/decide.ts';
import type { ExecuteCall, PlannedCall } from '../loop/plan.ts';
import { normalizeResponse } from '../loop/normalize.ts';
import { applyOutputRepair, decideFixedOutput } from '../loop/output.ts';
import { type StepState, initialStepState } from '../loop/state.ts';
import { agentInvokedEvent, agentRespondedEvent, providerFailureEvent, providerRunError, stepFailedEvent, stepRunError } from '../loop/step-events.ts';
import { type ExecConfig, TEST_PROVIDER_ID, testResponse, testStepFor } from '../loop/test-mode.ts';
import { type CallPlace, plannedCallEvents } from '../loop/tool-events.ts';
import { type ProviderResponse, asProviderFailure, failureLogFields } from '../provider.ts';
import { ZERO_TOKENS } from '../vocabulary/tokens.ts';
import { budgetRefusal, callCost, costFields, responseCost, runCostRefusal } from '../cost/call-cost.ts';
import { FIRST_TRY, afterFailedTry } from '../loop/provider-tries.ts';
import { modelTargets, providerFor, requestFor } from '../loop/model-targets.ts';
import type { RunError, RunRecord } from '../run-record.ts';
import { type RunState, type StateChange, applyStateChanges, stateSize } from '../state/run-state.ts';
import { sleep } from './backoff.ts';
import type { LocalEventLog } from './event-log.ts';
import type { LocalSpent, RunLocalOptions } from './local-options.ts';
import type { LocalTools } from './local-tools.ts';

export interface StepOutcome {
  output?: string;
  /** The parsed output, under an output schema (the key is absent otherwise: `null` is a value). */
  output_json?: unknown;
  error?: RunError;
  usage: RunRecord['usage'];
  iterations: number;
  /** The state as the step's last round left it (SPEC §17), and the changes that made it from the step's first. */
  state: RunState;
  changes: readonly StateChange[];
}

/** An agent step's loop in this process: provider calls and tool rounds until text, failure or cancellation. */
export class LocalStep {
  constructor(
    private readonly agent: Agent,
    private readonly settings: StepSettings,
    private readonly exec: ExecConfig,
    private readonly step_id: string,
    private readonly log: LocalEventLog,
    private readonly options: RunLocalOptions,
    private readonly tools: LocalTools,
    /** What the whole run has spent so far (shared by a workflow's steps), for the budget. */
    private readonly spent: LocalSpent,
    /** The run's state as the step starts (SPEC §17); its rounds' changes apply to the step's own copy. */
    private runState: RunState = {},
  ) {}

  /** The state changes of the step's rounds, in order. */
  private readonly stateChanges: StateChange[] = [];

  async run(input: RunInput): Promise<StepOutcome> {
    const { agent, settings, step_id, log } = this;
    log.append(agentInvokedEvent(agent, settings, step_id));
    const test = testStepFor(this.exec, step_id);
    if (test && 'output' in test) {
      const fixed = decideFixedOutput(step_id, settings, test.output);
      if (fixed.type === 'fail') {
        log.append(...fixed.events);
        return this.fail(ZERO_TOKENS, 0, stepRunError(fixed.error_code, fixed.message));
      }
      log.append(agentRespondedEvent(step_id, fixed.output, 0));
      return { ...withoutType(fixed), ...this.stateOutcome(), usage: ZERO_TOKENS, iterations: 0 };
    }
    let state = initialStepState(agent, input, step_id);
    for (;;) {
      if (this.options.signal?.aborted) return { ...this.stateOutcome(), usage: state.usage, iterations: state.iterations };
      const called = await this.callProvider(state, test && 'responses' in test ? test : undefined);
      // Stopped (the run cancelled, or another step failed it) while the call was out: the step ends as it stands, with no failure of its own.
      if ('stopped' in called) return { ...this.stateOutcome(), usage: state.usage, iterations: state.iterations };
      // A failed call is no iteration: the engine counts the responses it records.
      if ('error' in called) return this.fail(state.usage, state.iterations, called.error, state.iterations + 1);
      const response = called.response;
      const iteration = state.iterations + 1;
      const decision = markApprovals(
        decideResponse(agent, state, settings, response, { ...this.spent }),
        { step_id, iteration: state.iterations + 1 },
        this.log.run_id,
        this.tools.logger,
      );
      this.spent.tokens += response.usage.total;
      this.spent.tool_calls += executedCalls(decision);
      log.append(...decidedEvents(decision));
      switch (decision.type) {
        case 'complete':
          log.append(agentRespondedEvent(step_id, decision.output, iteration));
          return { ...withoutType(decision), ...this.stateOutcome(), usage: usageWith(state, response), iterations: iteration };
        case 'fail':
          log.append(...decision.events);
          return this.fail(usageWith(state, response), iteration, stepRunError(decision.error_code, decision.message), iteration);
        case 'final_answer':
          state = applyFinalAnswerNote(state, response);
          break;
        case 'repair_output':
          state = applyOutputRepair(state, response, decision.violation_description);
          break;
        case 'tools': {
          const contents = await this.runTools(decision.calls, { step_id, iteration });
          this.joinState(decision.calls, { step_id, iteration });
          state = applyToolRound(state, settings, response, decision.calls, contents);
        }
      }
    }
  }

  /** `iteration`: the one the step failed in, if it failed in one. */
  private fail(usage: RunRecord['usage'], iterations: number, error: RunError, iteration?: number): StepOutcome {
    this.log.append(stepFailedEvent(this.step_id, error, iteration));
    return { error, ...this.stateOutcome(), usage, iterations };
  }

  private stateOutcome(): Pick<StepOutcome, 'state' | 'changes'> {
    return { state: this.runState, changes: this.stateChanges };
  }

  /** The round's state changes, applied in call order at its join, with `StateUpdated` when they changed anything. */
  private joinState(calls: readonly PlannedCall[], place: CallPlace): void {
    const changes = this.tools.takeChanges(place.step_id, calls);
    if (changes.length === 0) return;
    const applied = applyStateChanges(this.runState, changes);
    this.runState = applied.state;
    this.stateChanges.push(...changes);
    // Changes that left every key as it was changed nothing to report.
    if (applied.keys.length === 0) return;
    this.log.append({ kind: 'StateUpdated', step_id: place.step_id, iteration: place.iteration, keys: applied.keys, state_size_bytes: stateSize(applied.state) });
  }

  /**
   * One provider call, its tries moved along the agent's models as {@link afterFailedTry} decides
   * (the engine's rule too): a retryable failure retries with backoff, then passes the same
   * request on to the next `model_fallbacks` entry; a 429 or an unreachable provider hands over at
   * once to an entry on another provider, else waits; the step fails when the last has failed.
   */
  private async callProvider(
    state: StepState,
    test: Parameters<typeof testResponse>[0] | undefined,
  ): Promise<{ response: ProviderResponse } | { error: RunError } | { stopped: true }> {
    const { agent, settings, options, log, step_id } = this;
    if (!test && !options.provider && !agent.provider) throw new ConfigError(`runLocal: agent '${agent.name}' needs a provider (or exec_config test mode)`);
    const base = buildRequest(agent, state, settings, options.default_model ?? options.provider?.defaultModel ?? 'default');
    const targets = test ? modelTargets(agent, settings).slice(0, 1) : modelTargets(agent, settings);
    const providers = test ? [undefined] : targets.map((target) => providerFor(target, options.providers ?? {}, options.provider, agent.name));
    const provider_ids = providers.map((provider) => provider?.id ?? TEST_PROVIDER_ID);
    const policy = {
      attempts_per_target: options.provider_retry?.attempts ?? PROVIDER_RETRY_DEFAULTS.attempts,
      backoff_ms: options.provider_retry?.backoff_ms ?? PROVIDER_RETRY_DEFAULTS.backoff_ms,
      max_backoff_ms: options.provider_retry?.max_backoff_ms ?? PROVIDER_RETRY_DEFAULTS.max_backoff_ms,
    };
    const iteration = state.iterations + 1;
    for (let position = FIRST_TRY; ; ) {
      const provider = providers[position.entry];
      const provider_id = provider_ids[position.entry]!;
      const request = requestFor(base, targets[position.entry]!, options.default_model, provider);
      // The call's worst case must fit the run's max_cost_usd before it is made (SPEC §14).
      const cost = callCost(options.pricing, request);
      const refused = runCostRefusal(settings, this.spent, cost);
      if (refused) {
        const { error_code, message } = budgetRefusal(step_id, refused);
        return { error: stepRunError(error_code, message) };
      }
      log.append(requestSentEvent(step_id, iteration, provider_id, request));
      const started = performance.now();
      try {
        const response = normalizeResponse(test ? testResponse(test, iteration) : await provider!.complete(request, { signal: options.signal }), iteration);
        // Priced at the model that answered: this entry's, a fallback's included (SPEC §16).
        const spent = responseCost(cost.price, response);
        log.append(...responseEvents(state, provider_id, request.model, response, Math.round(performance.now() - started), costFields(spent, this.spent.cost_micros ?? 0)));
        if (spent !== undefined) this.spent.cost_micros = (this.spent.cost_micros ?? 0) + spent;
        return { response };
      } catch (thrown) {
        if (options.signal?.aborted) return { stopped: true };
        const failure = asProviderFailure(thrown);
        const next = afterFailedTry(failure, position, provider_ids, policy);
        const waitMs = next.next === 'fail' ? 0 : next.wait_ms;
        const attempt = position.failures + 1;
        log.append(providerFailureEvent({ step_id, iteration }, { provider_id, model_id: request.model }, failure, attempt, Math.ceil(waitMs / 1000)));
        this.tools.logger.warn('provider call failed', { run_id: log.run_id, step_id, iteration, ...failureLogFields(failure, provider_id, attempt), next: next.next });
        if (next.next === 'fail' || options.signal?.aborted) return { error: providerRunError(failure, attempt) };
        await sleep(waitMs, options.signal);
        position = next.position;
      }
    }
  }

  /**
   * Runs a round: rejections answer at once; valid calls run in parallel (legacy_eager: in the
   * model's order, the rejections' answers between them, SPEC §3).
   */
  private async runTools(calls: readonly PlannedCall[], place: CallPlace): Promise<Map<number, string>> {
    this.tools.beginRound(place.step_id, this.runState, this.agent.max_state_bytes, this.settings.budget);
    const contents = new Map<number, string>();
    const executable = calls.filter((planned): planned is ExecuteCall => planned.action === 'execute');
    const signal = this.options.signal;
    const eager = this.settings.mode === 'legacy_eager';
    for (const planned of calls) {
      if (planned.action !== 'execute') {
        this.log.append(...plannedCallEvents(planned, place));
        if (planned.action === 'reject') contents.set(planned.index, planned.content);
        // A call waiting for approval holds back none of its siblings (SPEC §10): they run first, as the engine runs them.
      } else if (eager && !planned.approval) contents.set(planned.index, await this.tools.execute(planned, place, signal));
    }
    if (eager) {
      for (const planned of executable) if (planned.approval) contents.set(planned.index, await this.tools.afterApproval(planned, place, signal, false));
    } else {
      await Promise.all(
        executable.map(async (planned) =>
          contents.set(planned.index, planned.approval ? await this.tools.afterApproval(planned, place, signal, true) : await this.tools.limited(planned, place, signal)),
        ),
      );
    }
    return contents;
  }
}

/** A completed decision's output and, under an output schema, its parsed value. */
function withoutType({ type: _, ...output }: { type: 'complete'; output: string; output_json?: unknown }): Pick<StepOutcome, 'output' | 'output_json'> {
  return output;
}
