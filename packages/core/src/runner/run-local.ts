import { newRunId } from '../run-record.ts';
import { NamePattern } from '../names.ts';
import type { Agent } from '../definitions/agent.ts';
import { Workflow } from '../definitions/workflow.ts';
import { type RunInput, checkRunInput, checkWorkflowInput } from '../conversation/messages.ts';
import { RequestError } from '../errors.ts';
import { checkInitialState } from '../state/run-state.ts';
import { runFinishedEvent } from '../loop/step-events.ts';
import { checkExecConfig, checkExecSteps, childExecConfig } from '../loop/test-mode.ts';
import { LocalEventLog } from './event-log.ts';
import { LocalStep } from './local-step.ts';
import { type LocalChildren, LocalTools } from './local-tools.ts';
import { runLocalWorkflow } from './run-local-workflow.ts';
import { openToolSources } from '../tools/open-sources.ts';
import { silentLogger, stderrLogger } from '../logger.ts';
import type { LocalRun, LocalSpent, RunLocalOptions } from './local-options.ts';
import { checkPricing } from '../cost/pricing.ts';
import { usdOf } from '../vocabulary/tokens.ts';

/**
 * Runs an agent (or a workflow) to its end in this process, with the semantics and events of the queue engine.
 * The reference for the loop's behaviour, and the baseline for the benchmarks. `input` is a string or, for an
 * agent, a list of chat messages (SPEC §11), refused as the client refuses it.
 */
export async function runLocal(definition: Agent | Workflow, input: RunInput, options: RunLocalOptions = {}): Promise<LocalRun> {
  // Checked as the client checks it (SPEC §11): a string, or messages each of the right shape and size.
  checkRunInput(input);
  if (options.pricing !== undefined) checkPricing(options.pricing);
  const run_id = options.run_id ?? newRunId();
  if (!NamePattern.runId.test(run_id)) throw new RequestError('invalid_run_id', `run_id must match ${NamePattern.runId}, got ${JSON.stringify(run_id)}`);
  if (definition instanceof Workflow) {
    return withSources(definition, options, (opened) =>
      runLocalWorkflow(opened, checkWorkflowInput(input, opened.name), run_id, options, (spent) => localChildren(options, 0, spent, run_id)),
    );
  }
  return (await runAgent(definition, input, run_id, options, { depth: 0 })).run;
}

type Spent = LocalSpent;

const spentNothing = (): Spent => ({ tokens: 0, tool_calls: 0 });

/** Where a local agent run stands among runs: its depth, and the call of its parent that started it. */
interface Lineage {
  readonly depth: number;
  readonly parent?: { readonly run_id: string; readonly tool_call_id: string };
}

/** Tool sources (MCP servers) are listed for the run and closed when it ends. */
async function withSources<D extends Agent | Workflow, T>(definition: D, options: RunLocalOptions, run: (opened: D) => Promise<T>): Promise<T> {
  const logger = options.logger === false ? silentLogger : (options.logger ?? stderrLogger('arcflow.local'));
  const opened = await openToolSources([definition], { logger });
  try {
    return await run(opened.definitions[0] ?? definition);
  } finally {
    await opened.close();
  }
}

/** Runs an agent to its end; returns the run and what it spent with its children. */
function runAgent(definition: Agent, input: RunInput, run_id: string, options: RunLocalOptions, lineage: Lineage): Promise<{ run: LocalRun; spent: Spent }> {
  return withSources(definition, options, async (agent) => {
    const initial = checkInitialState(options.state, agent.max_state_bytes) ?? {};
    const settings = agent.settingsFor(options.config);
    const step_id = 's1';
    const exec = checkExecConfig(options.exec_config);
    checkExecSteps(exec, [step_id], `agent '${agent.name}'`);
    const created_at = Date.now();
    const log = new LocalEventLog(run_id, options.onEvent);
    log.append({ kind: 'RunEnqueued', step_id, agent: agent.name });
    const spent = spentNothing();
    const tools = new LocalTools(log, options, localChildren(options, lineage.depth, spent, run_id));
    const outcome = await new LocalStep(agent, settings, exec, step_id, log, options, tools, spent, initial).run(input);
    const cancelled = options.signal?.aborted === true;
    log.append(runFinishedEvent(step_id, outcome.usage, cancelled ? undefined : outcome.error, cancelled));
    const run: LocalRun = {
      run_id,
      status: cancelled ? 'cancelled' : outcome.error ? 'failed' : 'completed',
      agent: agent.name,
      ...(outcome.output !== undefined && !cancelled ? { output: outcome.output } : {}),
      ...('output_json' in outcome && !cancelled ? { output_json: outcome.output_json } : {}),
      ...(outcome.error && !cancelled ? { error: outcome.error } : {}),
      // The cost is the run's with its children's (SPEC §14), once a priced call was made.
      usage: spent.cost_micros === undefined ? outcome.usage : { ...outcome.usage, cost_usd: usdOf(spent.cost_micros) },
      iterations: outcome.iterations,
      state: outcome.state,
      created_at,
      finished_at: Date.now(),
      ...(lineage.parent ? { parent_run_id: lineage.parent.run_id, parent_tool_call_id: lineage.parent.tool_call_id } : {}),
      events: log.events,
    };
    return { run, spent };
  });
}

/**
 * How a run at `depth` runs its children (SPEC §13): each in this process, with the run's
 * provider, approver, logger and event callback (its events carry its own run id), but none of
 * the run's config or state; its budget is what the run's leaves (`childBudget`), and its spend
 * counts toward the run's. A child of a run in test mode runs in test mode (`childExecConfig`).
 */
function localChildren(options: RunLocalOptions, depth: number, spent: Spent, parent_run_id?: string): LocalChildren {
  return {
    depth,
    spent,
    async run(agent, input, run_id, call, signal, budget) {
      const { config: _config, exec_config, state: _state, run_id: _id, signal: _signal, ...inherited } = options;
      const exec = childExecConfig(exec_config, agent.name);
      const child = await runAgent(
        agent,
        input,
        run_id,
        { ...inherited, ...(signal ? { signal } : {}), ...(budget ? { config: { budget } } : {}), ...(exec ? { exec_config: exec } : {}) },
        {
          depth: depth + 1,
          ...(parent_run_id ? { parent: { run_id: parent_run_id, tool_call_id: call.tool_call_id } } : {}),
        },
      );
      spent.tokens += child.spent.tokens;
      spent.tool_calls += child.spent.tool_calls;
      if (child.spent.cost_micros !== undefined) spent.cost_micros = (spent.cost_micros ?? 0) + child.spent.cost_micros;
      return {
        status: child.run.status as 'completed' | 'failed' | 'cancelled',
        ...(child.run.output !== undefined ? { output: child.run.output } : {}),
        ...(child.run.error ? { error_code: child.run.error.error_code } : {}),
      };
    },
  };
}
