import { newRunId } from '../run-record.ts';
import { NamePattern } from '../names.ts';
import type { Agent } from '../definitions/agent.ts';
import { Workflow } from '../definitions/workflow.ts';
import { type RunInput, checkRunInput, checkWorkflowInput } from '../conversation/messages.ts';
import { RequestError } from '../errors.ts';
import { checkInitialState } from '../state/run-state.ts';
import type { TraceEvent } from '../events/types.ts';
import { runFinishedEvent } from '../loop/step-events.ts';
import { type ExecConfig, checkExecConfig } from '../loop/test-mode.ts';
import type { ModelProvider } from '../provider.ts';
import type { RunRecord } from '../run-record.ts';
import type { ToolLogger } from '../tools/define.ts';
import type { ApprovalAnswer, ApprovalRequest } from '../loop/approvals.ts';
import { LocalEventLog } from './event-log.ts';
import { LocalStep, LocalTools } from './local-step.ts';
import { runLocalWorkflow } from './run-local-workflow.ts';
import { openToolSources } from '../tools/open-sources.ts';
import { silentLogger, stderrLogger } from '../logger.ts';

export interface RunLocalOptions {
  /** The model backend. Not needed when test mode scripts every step. */
  provider?: ModelProvider;
  /** Named providers, for agents (and fallbacks) that name one with `provider` (SPEC §16). */
  providers?: Readonly<Record<string, ModelProvider>>;
  exec_config?: ExecConfig;
  /** Per-run overrides of the agent's configuration. */
  config?: unknown;
  run_id?: string;
  /** Model used when neither the config nor the agent names one. */
  default_model?: string;
  provider_retry?: { attempts?: number; backoff_ms?: number; max_backoff_ms?: number };
  /** Base delay between a tool's retries (default 200 ms). */
  tool_retry_backoff_ms?: number;
  /** Most tool calls running at once in this run (default 16). */
  tool_concurrency?: number;
  /** Aborting cancels the run. */
  signal?: AbortSignal;
  /** Called with each event as it is recorded. */
  onEvent?: (event: TraceEvent) => void;
  /** Where handler errors are logged (default: JSON lines on stderr). */
  logger?: ToolLogger | false;
  /**
   * Answers for a person when a call needs approval (SPEC §10): called once per such call. Without
   * it, those calls are rejected with the reason `no approver`.
   */
  approve?: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>;
  /** The run's initial state (SPEC §17): a JSON object of at most the agent's `max_state_bytes`; default `{}`. */
  state?: Readonly<Record<string, unknown>>;
}

/** A finished local run: the run record plus its trace events, in order. */
export type LocalRun = RunRecord & { readonly events: readonly TraceEvent[] };

/**
 * Runs an agent (or a workflow) to its end in this process, with the semantics and events of the queue engine.
 * The reference for the loop's behaviour, and the baseline for the benchmarks. `input` is a string or, for an
 * agent, a list of chat messages (SPEC §11), refused as the client refuses it.
 */
export async function runLocal(definition: Agent | Workflow, input: RunInput, options: RunLocalOptions = {}): Promise<LocalRun> {
  // Checked as the client checks it (SPEC §11): a string, or messages each of the right shape and size.
  checkRunInput(input);
  const run_id = options.run_id ?? newRunId();
  if (!NamePattern.runId.test(run_id)) throw new RequestError('invalid_run_id', `run_id must match ${NamePattern.runId}, got ${JSON.stringify(run_id)}`);
  // Tool sources (MCP servers) are listed for this run and closed when it ends.
  const logger = options.logger === false ? silentLogger : (options.logger ?? stderrLogger('arcflow.local'));
  const opened = await openToolSources([definition], { logger });
  try {
    return await runOpened(opened.definitions[0] ?? definition, input, run_id, options);
  } finally {
    await opened.close();
  }
}

async function runOpened(definition: Agent | Workflow, input: RunInput, run_id: string, options: RunLocalOptions): Promise<LocalRun> {
  if (definition instanceof Workflow) return runLocalWorkflow(definition, checkWorkflowInput(input, definition.name), run_id, options);
  const agent = definition;
  const initial = checkInitialState(options.state, agent.max_state_bytes) ?? {};
  const settings = agent.settingsFor(options.config);
  const exec = checkExecConfig(options.exec_config);
  const created_at = Date.now();
  const log = new LocalEventLog(run_id, options.onEvent);
  const step_id = 's1';
  log.append({ kind: 'RunEnqueued', step_id, agent: agent.name });

  const step = new LocalStep(agent, settings, exec, step_id, log, options, new LocalTools(log, options), { tokens: 0, tool_calls: 0 }, initial);
  const outcome = await step.run(input);
  const cancelled = options.signal?.aborted === true;
  log.append(runFinishedEvent(step_id, outcome.usage, cancelled ? undefined : outcome.error, cancelled));
  return {
    run_id,
    status: cancelled ? 'cancelled' : outcome.error ? 'failed' : 'completed',
    agent: agent.name,
    ...(outcome.output !== undefined && !cancelled ? { output: outcome.output } : {}),
    ...('output_json' in outcome && !cancelled ? { output_json: outcome.output_json } : {}),
    ...(outcome.error && !cancelled ? { error: outcome.error } : {}),
    usage: outcome.usage,
    iterations: outcome.iterations,
    state: outcome.state,
    created_at,
    finished_at: Date.now(),
    events: log.events,
  };
}
