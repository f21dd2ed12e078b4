import { type KnownKeys, checkKnownKeys } from '../definitions/known-keys.ts';
import { checkToolChoice } from '../definitions/model-settings.ts';
import { RUN_CONFIG_KEYS, type RunConfig, checkRunConfig } from '../definitions/settings.ts';
import { ConfigError } from '../errors.ts';
import { checkRequestJson } from '../json-limits.ts';
import { type ExecConfig, checkExecConfig, checkExecSteps } from '../loop/test-mode.ts';
import type { WorkflowGraph } from './graph.ts';

/** A workflow run's config: keys for every agent step, and `steps.<step_id>` for one. */
export interface WorkflowRunConfig extends RunConfig {
  steps?: Readonly<Record<string, RunConfig>>;
}

/** The keys of {@link WorkflowRunConfig}: an agent run's, and `steps`. */
const WORKFLOW_RUN_CONFIG_KEYS = { ...RUN_CONFIG_KEYS, steps: true } as const satisfies KnownKeys<WorkflowRunConfig>;

/**
 * Checks a workflow run's `config`: the top-level keys of an agent run's config, plus `steps`,
 * whose keys must be agent steps of the workflow. Throws a {@link ConfigError} naming the problem.
 */
export function checkWorkflowConfig(graph: WorkflowGraph, config: unknown): WorkflowRunConfig {
  if (config === undefined || config === null) return {};
  checkRequestJson('config', config);
  if (typeof config !== 'object' || Array.isArray(config)) throw new ConfigError('config must be an object');
  // Checked here, not only by checkRunConfig below, so a misspelt `steps` is suggested as such.
  checkKnownKeys(config, WORKFLOW_RUN_CONFIG_KEYS, 'config', 'config');
  const { steps, ...rest } = config as Record<string, unknown>;
  const shared = checkRunConfig(rest);
  if (steps !== undefined && (steps === null || typeof steps !== 'object' || Array.isArray(steps))) throw new ConfigError('config.steps must be an object');
  const own = (steps ?? {}) as Record<string, unknown>;
  for (const [step_id, stepConfig] of Object.entries(own)) {
    const step = graph.steps.find((candidate) => candidate.id === step_id);
    if (!step) throw new ConfigError(`config.steps.${step_id}: workflow '${graph.name}' has no step '${step_id}' (steps: ${graph.steps.map((each) => each.id).join(', ')})`);
    if (step.type !== 'agent') throw new ConfigError(`config.steps.${step_id}: '${step_id}' is a tool step; config applies to agent steps`);
    checkRunConfig(stepConfig, `config.steps.${step_id}`);
  }
  // A forced tool must be one each agent step it applies to has (as far as the registered graph lists them).
  for (const step of graph.steps) {
    if (step.type !== 'agent' || !step.tools) continue;
    const stepSettings = (own[step.id] as RunConfig | undefined)?.model_settings;
    if (stepSettings?.tool_choice !== undefined) checkToolChoice(stepSettings, step.tools, `config.steps.${step.id}.model_settings`);
    else if (shared.model_settings) checkToolChoice(shared.model_settings, step.tools, `config.model_settings (for step '${step.id}')`);
  }
  return config as WorkflowRunConfig;
}

/** One agent step's config: the step's own keys over the run's shared ones, key by key. */
export function stepRunConfig(config: WorkflowRunConfig | undefined, step_id: string): RunConfig | undefined {
  if (!config) return undefined;
  const { steps, ...shared } = config;
  const own = steps?.[step_id];
  if (!own) return Object.keys(shared).length > 0 ? shared : undefined;
  return {
    ...shared,
    ...own,
    ...(shared.tool_execution || own.tool_execution ? { tool_execution: { ...shared.tool_execution, ...own.tool_execution } } : {}),
  };
}

/**
 * Checks a workflow run's `exec_config`: every test step must be a step of the workflow, and a
 * tool step can only be given an `output`.
 */
export function checkWorkflowExecConfig(graph: WorkflowGraph, exec_config: unknown): ExecConfig {
  const exec = checkExecConfig(exec_config);
  checkExecSteps(
    exec,
    graph.steps.map((step) => step.id),
    `workflow '${graph.name}'`,
  );
  for (const [step_id, test] of Object.entries(exec.test?.steps ?? {})) {
    const step = graph.steps.find((candidate) => candidate.id === step_id);
    if (step?.type === 'tool' && !('output' in test))
      throw new ConfigError(`exec_config.test.steps.${step_id}: '${step_id}' is a tool step; test mode gives it an 'output', not 'responses'`);
  }
  return exec;
}
