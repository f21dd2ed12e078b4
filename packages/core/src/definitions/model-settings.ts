import { ConfigError } from '../errors.ts';
import { byteSize } from '../canonical.ts';
import { type KeysOwner, type KnownKeys, checkKnownKeys } from './known-keys.ts';
import { isPlainObject } from '../plain-object.ts';

/** Which tool the model must call, or whether it may call any (SPEC §16). */
export type ToolChoice = 'auto' | 'required' | 'none' | { readonly name: string };

/**
 * What the model takes besides the messages and tools (SPEC §16). Each key set is sent under its
 * chat-completions name; a key not set is not sent. The wire mapping lives in the provider.
 */
export interface ModelSettings {
  readonly temperature?: number;
  readonly top_p?: number;
  readonly max_tokens?: number;
  readonly stop?: string | readonly string[];
  readonly seed?: number;
  readonly frequency_penalty?: number;
  readonly presence_penalty?: number;
  readonly parallel_tool_calls?: boolean;
  readonly tool_choice?: ToolChoice;
  readonly reasoning_effort?: 'minimal' | 'low' | 'medium' | 'high';
  /** Keys merged into the request body, for server-specific options (vLLM's `top_k`). */
  readonly extra_body?: Readonly<Record<string, unknown>>;
}

/** One model to try when the ones before it failed with a retryable failure (SPEC §16). */
export interface ModelFallback {
  readonly model: string;
  /** A provider the worker holds by this name; absent: the agent's own provider. */
  readonly provider?: string;
}

const MODEL_SETTINGS_KEYS = {
  temperature: true,
  top_p: true,
  max_tokens: true,
  stop: true,
  seed: true,
  frequency_penalty: true,
  presence_penalty: true,
  parallel_tool_calls: true,
  tool_choice: true,
  reasoning_effort: true,
  extra_body: true,
} as const satisfies KnownKeys<ModelSettings>;

/** Where each model setting goes when it is given one level too high (`temperature` on an agent). */
export const MODEL_SETTING_PATHS: Readonly<Record<string, string>> = Object.freeze(
  Object.fromEntries(Object.keys(MODEL_SETTINGS_KEYS).map((key) => [key, `model_settings.${key}`])),
);

const FALLBACK_KEYS = { model: true, provider: true } as const satisfies KnownKeys<ModelFallback>;

/** The most fallbacks an agent or a run may list. */
export const MAX_MODEL_FALLBACKS = 4;
/** The largest `extra_body`, as JSON. */
export const MAX_EXTRA_BODY_BYTES = 16 * 1024;
/** Request fields `extra_body` may not set: arcflow owns them. */
const RESERVED_BODY_KEYS = ['model', 'messages', 'tools', 'stream'] as const;
const REASONING_EFFORTS = ['minimal', 'low', 'medium', 'high'] as const;
const TOOL_CHOICES = ['auto', 'required', 'none'] as const;

const numberIn = (value: unknown, low: number, high: number): boolean => typeof value === 'number' && Number.isFinite(value) && value >= low && value <= high;

/** Each key's check: the sentence after `model_settings.<key>: ` when the value is wrong. */
const VALUE_CHECKS: { readonly [K in keyof ModelSettings]-?: (value: unknown) => string | undefined } = {
  temperature: (value) => (numberIn(value, 0, 2) ? undefined : 'expected a number from 0 to 2'),
  top_p: (value) => (numberIn(value, 0, 1) ? undefined : 'expected a number from 0 to 1'),
  max_tokens: (value) => (Number.isSafeInteger(value) && (value as number) >= 1 ? undefined : 'expected an integer >= 1'),
  stop: (value) =>
    (typeof value === 'string' && value !== '') ||
    (Array.isArray(value) && value.length >= 1 && value.length <= 4 && value.every((item) => typeof item === 'string' && item !== ''))
      ? undefined
      : 'expected a non-empty string or a list of 1 to 4 of them',
  seed: (value) => (Number.isSafeInteger(value) ? undefined : 'expected an integer'),
  frequency_penalty: (value) => (numberIn(value, -2, 2) ? undefined : 'expected a number from -2 to 2'),
  presence_penalty: (value) => (numberIn(value, -2, 2) ? undefined : 'expected a number from -2 to 2'),
  parallel_tool_calls: (value) => (typeof value === 'boolean' ? undefined : 'expected true or false'),
  tool_choice: (value) =>
    (TOOL_CHOICES as readonly unknown[]).includes(value) || (isPlainObject(value) && Object.keys(value).join() === 'name' && typeof value.name === 'string' && value.name !== '')
      ? undefined
      : "expected 'auto', 'required', 'none' or { name: '<one of the agent's tools>' }",
  reasoning_effort: (value) =>
    (REASONING_EFFORTS as readonly unknown[]).includes(value) ? undefined : `expected one of ${REASONING_EFFORTS.map((effort) => `'${effort}'`).join(', ')}`,
  extra_body: (value) => {
    if (!isPlainObject(value)) return 'expected a JSON object';
    const reserved = RESERVED_BODY_KEYS.find((key) => Object.hasOwn(value, key));
    if (reserved) return `may not set '${reserved}' (arcflow sets it)`;
    let size: number;
    try {
      size = byteSize(JSON.stringify(value));
    } catch {
      return 'expected a JSON object';
    }
    return size > MAX_EXTRA_BODY_BYTES ? `is ${size} bytes as JSON; the limit is ${MAX_EXTRA_BODY_BYTES}` : undefined;
  },
};

/**
 * Checks `model_settings` given at `where` (`agent 'u'`, `config`): an unknown key is refused with
 * the nearest known one, a bad value with what was expected (`config.model_settings.temperature:
 * expected a number from 0 to 2`). `tools`, when known, are the names `tool_choice: { name }` may take.
 */
export function checkModelSettings(value: unknown, where: string, owner: KeysOwner, tools?: readonly string[]): ModelSettings {
  const path = `${where}${owner === 'definition' ? ': ' : '.'}model_settings`;
  if (!isPlainObject(value)) throw new ConfigError(`${path}: expected an object`);
  checkKnownKeys(value, MODEL_SETTINGS_KEYS, `${where}.model_settings`, owner);
  for (const [key, check] of Object.entries(VALUE_CHECKS) as [keyof ModelSettings, (value: unknown) => string | undefined][]) {
    if (value[key] === undefined) continue;
    const problem = check(value[key]);
    if (problem) throw new ConfigError(`${path}.${key}: ${problem}`);
  }
  if (tools) checkToolChoice(value as ModelSettings, tools, path);
  return value as ModelSettings;
}

/** A `tool_choice` naming a tool must name one the agent has. */
export function checkToolChoice(settings: ModelSettings, tools: readonly string[], path: string): void {
  const choice = settings.tool_choice;
  if (choice === undefined || typeof choice === 'string' || tools.includes(choice.name)) return;
  throw new ConfigError(`${path}.tool_choice: names '${choice.name}', which is not one of the agent's tools (${tools.length > 0 ? tools.join(', ') : 'it has none'})`);
}

/** Checks `model_fallbacks` given at `where`: a list of at most four `{ model, provider? }`. */
export function checkModelFallbacks(value: unknown, where: string, owner: KeysOwner): readonly ModelFallback[] {
  const path = `${where}${owner === 'definition' ? ': ' : '.'}model_fallbacks`;
  if (!Array.isArray(value) || value.length > MAX_MODEL_FALLBACKS) throw new ConfigError(`${path}: expected a list of at most ${MAX_MODEL_FALLBACKS} { model, provider? }`);
  for (const [index, entry] of value.entries()) {
    if (!isPlainObject(entry)) throw new ConfigError(`${path}[${index}]: expected { model, provider? }`);
    checkKnownKeys(entry, FALLBACK_KEYS, `${where}.model_fallbacks[${index}]`, owner);
    if (typeof entry.model !== 'string' || entry.model === '') throw new ConfigError(`${path}[${index}].model: expected a non-empty string`);
    if (entry.provider !== undefined && (typeof entry.provider !== 'string' || entry.provider === '')) {
      throw new ConfigError(`${path}[${index}].provider: expected a non-empty string`);
    }
  }
  return value as ModelFallback[];
}

/** The run's settings over the agent's, key by key (a key the run sets replaces the agent's whole value). */
export function mergeModelSettings(agent: ModelSettings | undefined, run: ModelSettings | undefined): ModelSettings {
  const merged: Record<string, unknown> = {};
  for (const key of Object.keys(MODEL_SETTINGS_KEYS) as (keyof ModelSettings)[]) {
    const value = run?.[key] ?? agent?.[key];
    if (value !== undefined) merged[key] = value;
  }
  return Object.freeze(merged) as ModelSettings;
}

/**
 * The settings one provider call sends. `tool_choice` other than `auto` holds for a step's first
 * call only (later calls send `auto`, so a loop that forces a tool can still end); a call without
 * tools (the final answer) sends neither `tool_choice` nor `parallel_tool_calls`.
 */
export function settingsForCall(settings: ModelSettings, call: { readonly first: boolean; readonly hasTools: boolean }): ModelSettings {
  const { tool_choice, parallel_tool_calls, ...rest } = settings;
  if (!call.hasTools) return rest;
  return {
    ...rest,
    ...(parallel_tool_calls !== undefined ? { parallel_tool_calls } : {}),
    ...(tool_choice !== undefined ? { tool_choice: call.first ? tool_choice : 'auto' } : {}),
  };
}
