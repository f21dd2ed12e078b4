import { checkRequestJson } from '../json-limits.ts';
import { LOOP_DETECTION_DEFAULTS, TOOL_EXECUTION_DEFAULTS } from '../defaults.ts';
import { ConfigError } from '../errors.ts';
import { type KeysOwner, type KnownKeys, checkKnownKeys } from './known-keys.ts';
import { type ResolvedOutput, resolveOutput } from './output-schema.ts';
import type { JsonSchema } from '../vocabulary/json-schema.ts';
import { MODEL_SETTING_PATHS, type ModelFallback, type ModelSettings, checkModelFallbacks, checkModelSettings, mergeModelSettings } from './model-settings.ts';
import { isPlainObject } from '../plain-object.ts';

export type ToolExecutionMode = 'llm_select' | 'legacy_eager';

export interface ToolExecutionConfig {
  mode?: ToolExecutionMode;
  max_iterations?: number;
  on_max_iterations?: 'fail' | 'final_answer';
}

const TOOL_EXECUTION_KEYS = { mode: true, max_iterations: true, on_max_iterations: true } as const satisfies KnownKeys<ToolExecutionConfig>;

export interface LoopDetectionConfig {
  window?: number;
  threshold?: number;
  action?: 'inject' | 'terminate';
}

const LOOP_DETECTION_KEYS = { window: true, threshold: true, action: true } as const satisfies KnownKeys<LoopDetectionConfig>;

/** Caps on what a run may spend, counted over the whole run (SPEC §10). */
export interface BudgetConfig {
  max_total_tokens?: number;
  max_tool_calls?: number;
  /** USD the run may spend (SPEC §14): each provider call's worst case must fit before it is made. */
  max_cost_usd?: number;
  on_exceeded?: 'fail' | 'final_answer';
}

const BUDGET_KEYS = { max_total_tokens: true, max_tool_calls: true, max_cost_usd: true, on_exceeded: true } as const satisfies KnownKeys<BudgetConfig>;

/** The per-run configuration a client may pass; it overrides the agent's own, key by key. */
export interface RunConfig {
  tool_execution?: ToolExecutionConfig;
  loop_detection?: LoopDetectionConfig | false;
  model?: string;
  budget?: BudgetConfig;
  /** Over the agent's, key by key (SPEC §16). */
  model_settings?: ModelSettings;
  /** Replaces the agent's list (SPEC §16). */
  model_fallbacks?: readonly ModelFallback[];
  /** JSON Schema the final answer must parse into and satisfy (SPEC §11); replaces the agent's. */
  output_schema?: JsonSchema;
  /** More calls the model gets after an answer that fails the output schema (default 2); they count as iterations. */
  output_retries?: number;
}

/** The keys of {@link RunConfig}; a workflow run's config adds `steps`. */
export const RUN_CONFIG_KEYS = Object.freeze({
  tool_execution: true,
  loop_detection: true,
  model: true,
  budget: true,
  model_settings: true,
  model_fallbacks: true,
  output_schema: true,
  output_retries: true,
} as const satisfies KnownKeys<RunConfig>);

export interface ResolvedBudget {
  readonly max_total_tokens: number | undefined;
  readonly max_tool_calls: number | undefined;
  readonly max_cost_usd: number | undefined;
  readonly on_exceeded: 'fail' | 'final_answer';
}

export interface ResolvedLoopDetection {
  readonly window: number;
  readonly threshold: number;
  readonly action: 'inject' | 'terminate';
}

/** Everything the loop needs to decide, resolved once per step. */
export interface StepSettings {
  readonly mode: ToolExecutionMode;
  readonly max_iterations: number;
  readonly on_max_iterations: 'fail' | 'final_answer';
  readonly loop_detection: ResolvedLoopDetection | false;
  readonly model: string | undefined;
  /** Absent when neither the agent nor the run sets a cap. */
  readonly budget?: ResolvedBudget;
  /** The run's model settings over the agent's; empty when neither sets any. */
  readonly model_settings: ModelSettings;
  /** The models to try, in order, after the first has failed for good (the run's list, else the agent's). */
  readonly model_fallbacks: readonly ModelFallback[];
  /** Absent when neither the run nor the agent sets an output schema. */
  readonly output?: ResolvedOutput;
}

/** Checks a run config's shape; throws a {@link ConfigError} naming the first problem (`config.budget has unknown key 'max_calls'`). */
export function checkRunConfig(config: unknown, where = 'config'): RunConfig {
  if (config === undefined || config === null) return {};
  checkRequestJson(where, config);
  return checkSettings(config, where, 'config');
}

/**
 * Checks the run-config keys of a definition (an agent's `tool_execution`, `loop_detection`, `model`,
 * `budget`, `output_schema`, …); an unknown key is an option: `unknown option 'max_iters' in agent 'u'.tool_execution`.
 */
export function checkDefinitionSettings(settings: RunConfig, where: string): RunConfig {
  checkRequestJson(where, settings);
  return checkSettings(settings, where, 'definition');
}

function checkSettings(config: unknown, where: string, owner: KeysOwner): RunConfig {
  const object = plainObject(config, where, RUN_CONFIG_KEYS, owner, MODEL_SETTING_PATHS);
  if (object.model !== undefined && (typeof object.model !== 'string' || object.model === '')) {
    throw new ConfigError(`${where}.model must be a non-empty string`);
  }
  if (object.tool_execution !== undefined) plainObject(object.tool_execution, `${where}.tool_execution`, TOOL_EXECUTION_KEYS, owner);
  if (object.model_settings !== undefined) checkModelSettings(object.model_settings, where, owner);
  if (object.model_fallbacks !== undefined) checkModelFallbacks(object.model_fallbacks, where, owner);
  if (object.budget !== undefined) plainObject(object.budget, `${where}.budget`, BUDGET_KEYS, owner);
  if (object.loop_detection !== undefined && object.loop_detection !== false) {
    plainObject(object.loop_detection, `${where}.loop_detection`, LOOP_DETECTION_KEYS, owner);
  }
  // Resolving against an empty base validates every value.
  resolveSettings(object as RunConfig, {}, where);
  return object as RunConfig;
}

/** Resolves settings field by field: the run's override, then the agent's, then the defaults. */
export function resolveSettings(agent: RunConfig, override: RunConfig = {}, where = 'config'): StepSettings {
  const exec = { ...(agent.tool_execution ?? {}) };
  const execOverride = override.tool_execution ?? {};
  const mode = execOverride.mode ?? exec.mode ?? TOOL_EXECUTION_DEFAULTS.mode;
  const max_iterations = execOverride.max_iterations ?? exec.max_iterations ?? TOOL_EXECUTION_DEFAULTS.max_iterations;
  const on_max_iterations = execOverride.on_max_iterations ?? exec.on_max_iterations ?? TOOL_EXECUTION_DEFAULTS.on_max_iterations;
  if (mode !== 'llm_select' && mode !== 'legacy_eager') {
    throw new ConfigError(`${where}.tool_execution.mode must be 'llm_select' or 'legacy_eager', got ${JSON.stringify(mode)}`);
  }
  if (!Number.isSafeInteger(max_iterations) || max_iterations < 1) {
    throw new ConfigError(`${where}.tool_execution.max_iterations must be an integer >= 1, got ${JSON.stringify(max_iterations)}`);
  }
  if (on_max_iterations !== 'fail' && on_max_iterations !== 'final_answer') {
    throw new ConfigError(`${where}.tool_execution.on_max_iterations must be 'fail' or 'final_answer', got ${JSON.stringify(on_max_iterations)}`);
  }
  const loopConfig = override.loop_detection !== undefined ? override.loop_detection : agent.loop_detection;
  const budget = resolveBudget({ ...(agent.budget ?? {}), ...(override.budget ?? {}) }, where);
  const output = resolveOutput(override.output_schema ?? agent.output_schema, override.output_retries ?? agent.output_retries, where);
  return Object.freeze({
    mode,
    max_iterations,
    on_max_iterations,
    loop_detection: resolveLoopDetection(loopConfig, where),
    model: override.model ?? agent.model,
    ...(budget ? { budget } : {}),
    model_settings: mergeModelSettings(agent.model_settings, override.model_settings),
    model_fallbacks: Object.freeze([...(override.model_fallbacks ?? agent.model_fallbacks ?? [])]),
    ...(output ? { output } : {}),
  });
}

/** A budget with its default (`on_exceeded: 'fail'`); undefined when it caps nothing. */
function resolveBudget(config: BudgetConfig, where: string): ResolvedBudget | undefined {
  for (const key of ['max_total_tokens', 'max_tool_calls'] as const) {
    const value = config[key];
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) throw new ConfigError(`${where}.budget.${key} must be an integer >= 0, got ${JSON.stringify(value)}`);
  }
  const { max_cost_usd } = config;
  if (max_cost_usd !== undefined && (typeof max_cost_usd !== 'number' || !Number.isFinite(max_cost_usd) || max_cost_usd < 0)) {
    throw new ConfigError(`${where}.budget.max_cost_usd must be a number >= 0 (USD), got ${JSON.stringify(max_cost_usd)}`);
  }
  const on_exceeded = config.on_exceeded ?? 'fail';
  if (on_exceeded !== 'fail' && on_exceeded !== 'final_answer') {
    throw new ConfigError(`${where}.budget.on_exceeded must be 'fail' or 'final_answer', got ${JSON.stringify(on_exceeded)}`);
  }
  if (config.max_total_tokens === undefined && config.max_tool_calls === undefined && max_cost_usd === undefined) return undefined;
  return Object.freeze({ max_total_tokens: config.max_total_tokens, max_tool_calls: config.max_tool_calls, max_cost_usd, on_exceeded });
}

function resolveLoopDetection(config: LoopDetectionConfig | false | undefined, where: string): ResolvedLoopDetection | false {
  if (config === false) return false;
  const window = config?.window ?? LOOP_DETECTION_DEFAULTS.window;
  const threshold = config?.threshold ?? LOOP_DETECTION_DEFAULTS.threshold;
  const action = config?.action ?? LOOP_DETECTION_DEFAULTS.action;
  if (!Number.isSafeInteger(window) || window < 1) {
    throw new ConfigError(`${where}.loop_detection.window must be an integer >= 1, got ${JSON.stringify(window)}`);
  }
  if (!Number.isSafeInteger(threshold) || threshold < 2 || threshold > window) {
    throw new ConfigError(`${where}.loop_detection.threshold must be an integer from 2 to window (${window}), got ${JSON.stringify(threshold)}`);
  }
  if (action !== 'inject' && action !== 'terminate') {
    throw new ConfigError(`${where}.loop_detection.action must be 'inject' or 'terminate', got ${JSON.stringify(action)}`);
  }
  return Object.freeze({ window, threshold, action });
}

function plainObject(value: unknown, where: string, keys: Readonly<Record<string, true>>, owner: KeysOwner, elsewhere?: Readonly<Record<string, string>>): Record<string, unknown> {
  if (!isPlainObject(value)) throw new ConfigError(`${where} must be an object`);
  checkKnownKeys(value, keys, where, owner, elsewhere);
  return value as Record<string, unknown>;
}
