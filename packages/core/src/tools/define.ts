import { shortHash } from '../canonical.ts';
import { TOOL_DEFAULTS } from '../defaults.ts';
import { type KnownKeys, checkKnownKeys } from '../definitions/known-keys.ts';
import { ConfigError } from '../errors.ts';
import { NamePattern } from '../names.ts';
import type { StateAccess } from '../state/run-state.ts';
import type { JsonSchema } from '../vocabulary/json-schema.ts';
import { compileSchema } from './schema.ts';

/** What a handler may log; the worker decides where it goes (never into traces). */
export interface ToolLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** The context every tool handler receives. */
export interface ToolContext {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  /** 1-based attempt of this execution. */
  readonly attempt: number;
  /** `${run_id}:${step_id}:${iteration}:${tool_call_id}`, stable across retries and re-deliveries. */
  readonly idempotency_key: string;
  /** Aborted on timeout or cancellation. */
  readonly signal: AbortSignal;
  readonly log: ToolLogger;
  /**
   * The run's state (SPEC §17): as it stood when this call's round began, plus this call's own
   * changes, which count only if the call completes and are applied at the join in call order.
   */
  readonly state: StateAccess;
  /**
   * Ends the handler's job without a result (SPEC §20): `return ctx.defer()`. The call waits for
   * its result from outside (`submitToolResult` with this call's `run_id` and `tool_call_id`), at
   * most `timeout_ms` (default the tool's `result_timeout_ms`); state changes made before are kept.
   */
  defer(options?: { readonly timeout_ms?: number }): DeferredResult;
}

/** What `ctx.defer()` returns: the handler's job ends and the call waits for its result from outside. */
export interface DeferredResult {
  readonly [DEFERRED]: true;
  readonly timeout_ms: number;
}

/** Marks a {@link DeferredResult}; no JSON value a handler returns can carry it. */
export const DEFERRED: unique symbol = Symbol.for('arcflow.deferred');

/** Whether a handler's return value is `ctx.defer()`'s. */
export function isDeferred(value: unknown): value is DeferredResult {
  return typeof value === 'object' && value !== null && (value as { [DEFERRED]?: unknown })[DEFERRED] === true;
}

/** What `needs_approval` as a function is given, besides the arguments: a handler's context without `signal` and `state`. */
export type ApprovalContext = Omit<ToolContext, 'signal' | 'state' | 'defer'>;

/** Whether a call needs a person's approval: always, never, or decided per call from its arguments. */
export type NeedsApproval<Args = any> = boolean | ((args: Args, ctx: ApprovalContext) => boolean);

/** A tool's handler. `Args` defaults to `any`: a handler receives whatever its schema admits. */
export type ToolHandler<Args = any> = (args: Args, ctx: ToolContext) => unknown | Promise<unknown>;

/** A tool as the user writes it (snake_case keys, like a JSON config). */
export interface ToolConfig<Args = any> {
  name: string;
  description: string;
  input_schema: JsonSchema;
  timeout_ms?: number;
  concurrency?: number;
  retries?: number;
  max_result_bytes?: number;
  /** A valid call waits for a person's approval before it runs (SPEC §10). */
  needs_approval?: NeedsApproval<Args>;
  /** How long a call waits for approval before it fails `approval_timeout` (default 24 h). */
  approval_timeout_ms?: number;
  /**
   * Checks a result given from outside (SPEC §20): an external tool's, or a deferred call's. A
   * result that fails it is refused, naming the path, and the call goes on waiting.
   */
  output_schema?: JsonSchema;
  /** How long a call waits for its result from outside before it fails `result_timeout` (default 24 h, at most 30 days). */
  result_timeout_ms?: number;
  /** Without a handler the tool is external (SPEC §20): its calls are not executed but wait for a result from outside (a browser, a webhook). */
  handler?: ToolHandler<Args>;
}

/** The keys of {@link ToolOptions}: what a tool takes besides its name, description, schema and handler. */
export const TOOL_OPTION_KEYS = {
  timeout_ms: true,
  concurrency: true,
  retries: true,
  max_result_bytes: true,
  needs_approval: true,
  approval_timeout_ms: true,
  output_schema: true,
  result_timeout_ms: true,
} as const satisfies KnownKeys<ToolOptions>;

/** The keys of {@link ToolConfig}: any other is refused, naming the nearest of these. */
const TOOL_KEYS = { name: true, description: true, input_schema: true, ...TOOL_OPTION_KEYS, handler: true } as const satisfies KnownKeys<ToolConfig>;

/** A tool after its schema has been compiled and its options resolved. */
export interface ToolDefinition {
  readonly kind: 'tool';
  readonly name: string;
  readonly description: string;
  readonly input_schema: JsonSchema;
  readonly input_schema_hash: string;
  readonly timeout_ms: number;
  readonly concurrency: number | undefined;
  readonly retries: number;
  readonly max_result_bytes: number;
  /** Absent for an external tool, whose calls wait for a result from outside instead (SPEC §20). */
  readonly handler: ToolHandler | undefined;
  /** The tool has no handler: its valid calls are never executed, they wait for a result (SPEC §20). */
  readonly external: boolean;
  readonly needs_approval: NeedsApproval;
  readonly approval_timeout_ms: number;
  readonly output_schema: JsonSchema | undefined;
  readonly result_timeout_ms: number;
  /** Checks a result from outside against `output_schema`: `undefined` when it fits (or there is none), else the violation. */
  readonly checkOutput: (output: unknown) => string | undefined;
  /** Returns `undefined` for valid arguments, else the violation text (paths and expectations only). */
  readonly check: (args: unknown) => string | undefined;
}

const TOOL_NAME = NamePattern.tool;

/** Defines a tool; the schema is compiled once, here. Errors name the tool. */
export function tool<Args = any>(config: ToolConfig<Args>): ToolDefinition {
  const name = config?.name;
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw new ConfigError(`tool name must match ${TOOL_NAME} (letters, digits, _ and -), got ${JSON.stringify(name)}`);
  }
  checkKnownKeys(config, TOOL_KEYS, `tool '${name}'`, 'definition');
  if (config.handler !== undefined && typeof config.handler !== 'function') throw new ConfigError(`tool '${name}': handler must be a function`);
  if (typeof config.description !== 'string') throw new ConfigError(`tool '${name}': description must be a string`);
  const check = compileSchema(`tool '${name}': input_schema`, config.input_schema);
  const options = resolveToolOptions(`tool '${name}'`, config);
  return Object.freeze({
    kind: 'tool' as const,
    name,
    description: config.description,
    input_schema: config.input_schema,
    input_schema_hash: shortHash(config.input_schema),
    ...options,
    handler: config.handler as ToolHandler | undefined,
    external: config.handler === undefined,
    check,
  });
}

/** The options every tool takes besides its name, description, schema and handler (MCP tools take them too). */
export type ToolOptions = Pick<
  ToolConfig,
  'timeout_ms' | 'concurrency' | 'retries' | 'max_result_bytes' | 'needs_approval' | 'approval_timeout_ms' | 'output_schema' | 'result_timeout_ms'
>;

/** {@link ToolOptions} with every default applied. */
export type ResolvedToolOptions = Pick<
  ToolDefinition,
  'timeout_ms' | 'concurrency' | 'retries' | 'max_result_bytes' | 'needs_approval' | 'approval_timeout_ms' | 'output_schema' | 'result_timeout_ms' | 'checkOutput'
>;

/** Checks a tool's options and applies their defaults; errors start with `where` (`tool 'get_weather'`). */
export function resolveToolOptions(where: string, options: ToolOptions): ResolvedToolOptions {
  const timeout_ms = positiveInt(where, 'timeout_ms', options.timeout_ms ?? TOOL_DEFAULTS.timeout_ms, 1);
  // A timer longer than this fires at once (Node's timers are 32-bit): every call would time out.
  if (timeout_ms > MAX_TIMER_MS) throw new ConfigError(`${where}: timeout_ms must be at most ${MAX_TIMER_MS} (about 24.8 days), got ${timeout_ms}`);
  const retries = positiveInt(where, 'retries', options.retries ?? TOOL_DEFAULTS.retries, 0);
  const max_result_bytes = positiveInt(where, 'max_result_bytes', options.max_result_bytes ?? TOOL_DEFAULTS.max_result_bytes, 64);
  const concurrency = options.concurrency === undefined ? undefined : positiveInt(where, 'concurrency', options.concurrency, 1);
  const needs_approval = options.needs_approval ?? false;
  if (typeof needs_approval !== 'boolean' && typeof needs_approval !== 'function') {
    throw new ConfigError(`${where}: needs_approval must be a boolean or a function of (args, ctx), got ${JSON.stringify(needs_approval)}`);
  }
  // A wait for a person is bounded as a wait for a result is (its expiry must be a time Redis can keep).
  const approval_timeout_ms = resultTimeoutMs(`${where}: approval_timeout_ms`, options.approval_timeout_ms ?? TOOL_DEFAULTS.approval_timeout_ms);
  const result_timeout_ms = resultTimeoutMs(`${where}: result_timeout_ms`, options.result_timeout_ms ?? TOOL_DEFAULTS.result_timeout_ms);
  const output_schema = options.output_schema;
  const checkOutput = output_schema === undefined ? () => undefined : compileSchema(`${where}: output_schema`, output_schema);
  return {
    timeout_ms,
    concurrency,
    retries,
    max_result_bytes,
    needs_approval: needs_approval as NeedsApproval,
    approval_timeout_ms,
    output_schema,
    result_timeout_ms,
    checkOutput,
  };
}

/** A wait for a result from outside: a whole number of ms from 1 to 30 days (SPEC §20); errors start with `where`. */
export function resultTimeoutMs(where: string, value: unknown): number {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > TOOL_DEFAULTS.max_result_timeout_ms) {
    throw new ConfigError(`${where} must be an integer from 1 to ${TOOL_DEFAULTS.max_result_timeout_ms} (30 days), got ${JSON.stringify(value)}`);
  }
  return value as number;
}

/** The longest delay a Node timer keeps. */
const MAX_TIMER_MS = 2_147_483_647;

function positiveInt(where: string, key: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new ConfigError(`${where}: ${key} must be an integer >= ${min}, got ${JSON.stringify(value)}`);
  }
  return value;
}
