import type { TraceEvent } from '../events/types.ts';
import type { ApprovalAnswer, ApprovalRequest } from '../loop/approvals.ts';
import type { ExecConfig } from '../loop/test-mode.ts';
import type { ToolResultInput, ToolResultRequest } from '../loop/tool-results.ts';
import type { ModelProvider } from '../provider.ts';
import type { RunRecord } from '../run-record.ts';
import type { ToolLogger } from '../tools/define.ts';
import type { Pricing } from '../cost/pricing.ts';

/** How `runLocal` runs: its provider, test mode, per-run config, retries, approvals and callbacks. */
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
  /**
   * Answers a call that waits for its result from outside (SPEC §20): an external tool's call, or
   * a handler's `ctx.defer()`. Called for each such call (again after an output the tool's
   * `output_schema` refuses: the call goes on waiting). Without it, those calls fail `result_timeout` at once.
   */
  toolResult?: (request: ToolResultRequest) => ToolResultInput | Promise<ToolResultInput>;
  /** Each model's price (SPEC §14), as the worker option: `TokensConsumed` and the record's `usage` then carry the cost, and `max_cost_usd` is checked before each call. */
  pricing?: Pricing;
  /** The run's initial state (SPEC §17): a JSON object of at most the agent's `max_state_bytes`; default `{}`. */
  state?: Readonly<Record<string, unknown>>;
}

/** What a local run (with its children) has spent, for its budget and its parent's (SPEC §10, §13, §14); `cost_micros` once a priced call was made. */
export interface LocalSpent {
  tokens: number;
  tool_calls: number;
  cost_micros?: number;
}

/** A finished local run: the run record plus its trace events, in order. */
export type LocalRun = RunRecord & { readonly events: readonly TraceEvent[] };
