import { type KnownKeys, checkKnownKeys, clipped, nearestKey } from '../definitions/known-keys.ts';
import { ConfigError } from '../errors.ts';
import { checkRequestJson } from '../json-limits.ts';
import { NamePattern } from '../names.ts';
import { ZERO_TOKENS } from '../vocabulary/tokens.ts';
import { type ProviderResponse, ProviderFailure } from '../provider.ts';

/** One scripted turn of test mode: text, or tool calls. */
export type TestTurn = { readonly output: string } | { readonly tool_calls: readonly { readonly name: string; readonly arguments: unknown; readonly id?: string }[] };

/** Test mode for one step: a fixed output with no provider call, or scripted turns. */
export type TestStep = { readonly output: string } | { readonly responses: readonly TestTurn[] };

export interface ExecConfig {
  readonly test?: {
    readonly steps?: Readonly<Record<string, TestStep>>;
    /** The script of every child run (SPEC §13) of the agent it names, at any depth: its one step's. */
    readonly agents?: Readonly<Record<string, TestStep>>;
  };
}

/** The provider id recorded for scripted test turns. */
export const TEST_PROVIDER_ID = 'test';

/** The keys of an `exec_config`, of its `test`, and of a test step. */
const EXEC_CONFIG_KEYS = { test: true } as const satisfies KnownKeys<ExecConfig>;
const TEST_KEYS = { steps: true, agents: true } as const satisfies KnownKeys<NonNullable<ExecConfig['test']>>;
const TEST_STEP_KEYS = { output: true, responses: true } as const satisfies KnownKeys<TestStep>;
/** A step's script written straight under `test` belongs under a step id. */
const UNDER_A_STEP = { output: 'steps.s1.output', responses: 'steps.s1.responses' } as const;

/**
 * Checks an `exec_config`; throws a {@link ConfigError} naming the first problem by its path. An
 * unknown or misspelt key is refused, naming the nearest known one: test mode must never fall
 * through to a real provider because a key was not recognised.
 */
export function checkExecConfig(value: unknown): ExecConfig {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new ConfigError('exec_config must be an object');
  checkRequestJson('exec_config', value);
  checkKnownKeys(value, EXEC_CONFIG_KEYS, 'exec_config', 'config');
  const test = (value as Record<string, unknown>).test;
  if (test === undefined) return value as ExecConfig;
  if (test === null || typeof test !== 'object' || Array.isArray(test)) throw new ConfigError('exec_config.test must be an object');
  checkKnownKeys(test, TEST_KEYS, 'exec_config.test', 'config', UNDER_A_STEP);
  const steps = (test as Record<string, unknown>).steps;
  if (steps === null || typeof steps !== 'object' || Array.isArray(steps)) {
    throw new ConfigError(`exec_config.test.steps must be an object of scripts by step id, e.g. {"steps":{"s1":{"output":"…"}}}`);
  }
  for (const [stepId, step] of Object.entries(steps)) checkTestStep(`exec_config.test.steps.${clipped(stepId)}`, step);
  const agents = (test as Record<string, unknown>).agents;
  if (agents !== undefined) {
    if (agents === null || typeof agents !== 'object' || Array.isArray(agents)) throw new ConfigError('exec_config.test.agents must be an object of scripts by agent name');
    for (const [agent, step] of Object.entries(agents)) checkTestStep(`exec_config.test.agents.${clipped(agent)}`, step);
  }
  return value as ExecConfig;
}

/**
 * Refuses a test script for a step the definition does not have (`owner`: `agent 'researcher'`,
 * whose one step is `s1`, or `workflow 'w'`), naming the step and the ones there are.
 */
export function checkExecSteps(exec: ExecConfig, stepIds: readonly string[], owner: string): void {
  for (const step_id of Object.keys(exec.test?.steps ?? {})) {
    if (stepIds.includes(step_id)) continue;
    const nearest = nearestKey(step_id, stepIds);
    throw new ConfigError(
      `exec_config.test.steps.${clipped(step_id)}: ${owner} has no step '${clipped(step_id)}'${nearest ? `; did you mean '${nearest}'?` : ''} (steps: ${stepIds.join(', ')})`,
    );
  }
}

/**
 * The `exec_config` of a child run of `agent` (SPEC §13) started by a run with `parent`'s: none
 * when the parent is not in test mode; else test mode too, its step scripted by the parent's
 * `test.agents[agent]` (passed on, for the child's own children). A child whose agent has no
 * script gets an empty one: its step fails `test_responses_exhausted` at its first provider call,
 * and no real provider is ever called.
 */
export function childExecConfig(parent: ExecConfig | undefined, agent: string): ExecConfig | undefined {
  const test = parent?.test;
  if (!test) return undefined;
  const script = test.agents && Object.hasOwn(test.agents, agent) ? test.agents[agent] : undefined;
  return { test: { steps: { s1: script ?? { responses: [] } }, ...(test.agents ? { agents: test.agents } : {}) } };
}

function checkTestStep(where: string, step: unknown): void {
  if (step === null || typeof step !== 'object' || Array.isArray(step)) throw new ConfigError(`${where} needs 'output' (a string) or 'responses' (an array)`);
  checkKnownKeys(step, TEST_STEP_KEYS, where, 'config');
  const record = step as Record<string, unknown>;
  if (typeof record.output === 'string') return;
  if (!Array.isArray(record.responses)) throw new ConfigError(`${where} needs 'output' (a string) or 'responses' (an array)`);
  record.responses.forEach((turn: unknown, index: number) => {
    const entry = turn as Record<string, unknown> | null;
    if (entry && typeof entry.output === 'string') return;
    const calls = entry?.tool_calls;
    if (!Array.isArray(calls) || calls.some((call) => typeof (call as { name?: unknown })?.name !== 'string')) {
      throw new ConfigError(`${where}.responses[${index}] needs 'output' (a string) or 'tool_calls' (an array of {name, arguments})`);
    }
    // A turn that neither answers nor calls a tool is what a model may not give (SPEC §3): it could never work.
    if (calls.length === 0) throw new ConfigError(`${where}.responses[${index}].tool_calls must name at least one call`);
    calls.forEach((call: { id?: unknown }, position: number) => {
      if (call.id !== undefined && (typeof call.id !== 'string' || !NamePattern.toolCallId.test(call.id))) {
        throw new ConfigError(`${where}.responses[${index}].tool_calls[${position}].id must match ${NamePattern.toolCallId}, got ${JSON.stringify(call.id)}`);
      }
    });
  });
}

/** The test-mode script for a step, if the run carries one. */
export function testStepFor(exec: ExecConfig | undefined, step_id: string): TestStep | undefined {
  return exec?.test?.steps?.[step_id];
}

/** The scripted response for `iteration` (1-based), as if a provider had sent it. */
export function testResponse(step: { readonly responses: readonly TestTurn[] }, iteration: number): ProviderResponse {
  const turn = step.responses[iteration - 1];
  if (!turn) {
    throw new ProviderFailure('test_responses_exhausted', `test mode has no response for iteration ${iteration}`, { retryable: false });
  }
  if ('output' in turn) return { content: turn.output, tool_calls: [], finish_reason: 'stop', usage: ZERO_TOKENS, model: TEST_PROVIDER_ID };
  return {
    content: null,
    finish_reason: 'tool_calls',
    usage: ZERO_TOKENS,
    model: TEST_PROVIDER_ID,
    tool_calls: turn.tool_calls.map((call, index) => ({
      id: call.id ?? `call_${iteration}_${index + 1}`,
      type: 'function' as const,
      function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}) },
    })),
  };
}
