import { ConfigError } from '../errors.ts';
import { shortHash } from '../canonical.ts';
import { NamePattern } from '../names.ts';
import { DEFAULT_MAX_STATE_BYTES } from '../state/run-state.ts';
import type { JsonSchema } from '../vocabulary/json-schema.ts';
import type { ToolDefinition } from '../tools/define.ts';
import { type ToolSource, isToolSource } from '../tools/source.ts';
import { type KnownKeys, checkKnownKeys } from './known-keys.ts';
import { MODEL_SETTING_PATHS, type ModelFallback, type ModelSettings, checkModelSettings, checkToolChoice } from './model-settings.ts';
import { type BudgetConfig, type LoopDetectionConfig, type StepSettings, type ToolExecutionConfig, checkDefinitionSettings, checkRunConfig, resolveSettings } from './settings.ts';

export interface AgentConfig {
  name: string;
  role?: string;
  instructions?: string;
  /** Tools from `tool()`, and tool sources (`mcpTools(…)`) whose tools are listed when a worker starts. */
  tools?: readonly (ToolDefinition | ToolSource)[];
  /** Model id; else the worker's default. */
  model?: string;
  tool_execution?: ToolExecutionConfig;
  /** Optional; `false` turns loop detection off. */
  loop_detection?: LoopDetectionConfig | false;
  /** Optional caps on what a run of this agent may spend; a run's `config.budget` overrides them field by field. */
  budget?: BudgetConfig;
  /** Temperature, `max_tokens`, `tool_choice`, … sent with each model call; a run's `config.model_settings` overrides them key by key (SPEC §16). */
  model_settings?: ModelSettings;
  /** The name of the worker's provider this agent's calls go through (`startWorker({ providers })`); else the worker's default provider. */
  provider?: string;
  /** Models tried in order when a call has failed for good with a retryable failure (at most 4). */
  model_fallbacks?: readonly ModelFallback[];
  /** JSON Schema the final answer must parse into and satisfy (SPEC §11); a run's `config.output_schema` replaces it. */
  output_schema?: JsonSchema;
  /** More calls the model gets after an answer that fails `output_schema` (default 2); they count as iterations. */
  output_retries?: number;
  /** The most a run's state (SPEC §17) may take, in bytes of its JSON (default 262,144). */
  max_state_bytes?: number;
  /**
   * Whether this agent's runs stream the model's text as it is written (SPEC §12) when the run
   * does not say; a run's own `stream` wins. Default false: each iteration's text comes whole.
   */
  stream?: boolean;
}

/** The keys of {@link AgentConfig}: any other is refused, naming the nearest of these. */
const AGENT_KEYS = {
  name: true,
  role: true,
  instructions: true,
  tools: true,
  model: true,
  tool_execution: true,
  loop_detection: true,
  budget: true,
  model_settings: true,
  provider: true,
  model_fallbacks: true,
  output_schema: true,
  output_retries: true,
  max_state_bytes: true,
  stream: true,
} as const satisfies KnownKeys<AgentConfig>;

const AGENT_NAME = NamePattern.agent;

/** An agent definition. Its configuration is checked here, so a bad agent never starts a worker. */
export class Agent {
  readonly kind = 'agent' as const;
  readonly name: string;
  readonly role: string | undefined;
  readonly instructions: string | undefined;
  readonly model: string | undefined;
  readonly tools: readonly ToolDefinition[];
  /** Sources whose tools are not listed yet: a worker (or `runLocal`) serves the agent {@link Agent.withSourceTools} returns. */
  readonly tool_sources: readonly ToolSource[];
  readonly tool_execution: ToolExecutionConfig;
  readonly loop_detection: LoopDetectionConfig | false | undefined;
  readonly budget: BudgetConfig | undefined;
  readonly model_settings: ModelSettings | undefined;
  /** The worker's provider of this name makes the agent's calls; undefined: the worker's default provider. */
  readonly provider: string | undefined;
  readonly model_fallbacks: readonly ModelFallback[] | undefined;
  readonly output_schema: JsonSchema | undefined;
  readonly output_retries: number | undefined;
  /** The most a run's state may take, in bytes of its JSON. */
  readonly max_state_bytes: number;
  /** Whether runs that do not say stream their text as the model writes it. */
  readonly stream: boolean;
  /** Settings with every default applied. */
  readonly settings: StepSettings;
  /**
   * 16 hex characters over what decides the agent's runs: its instructions, role and model, each
   * tool's name, schema hash and limits, and its resolved settings. Recorded with each run at
   * enqueue; a worker whose hash differs still continues the run and says so (`DefinitionChanged`).
   */
  readonly definition_hash: string;
  readonly #toolsByName: ReadonlyMap<string, ToolDefinition>;
  readonly #config: AgentConfig;

  constructor(config: AgentConfig) {
    const name = config?.name;
    if (typeof name !== 'string' || !AGENT_NAME.test(name)) {
      throw new ConfigError(`agent name must match ${AGENT_NAME}, got ${JSON.stringify(name)}`);
    }
    checkKnownKeys(config, AGENT_KEYS, `agent '${name}'`, 'definition', MODEL_SETTING_PATHS);
    const { tools, sources, byName } = sortTools(name, config.tools ?? []);
    if (config.provider !== undefined && (typeof config.provider !== 'string' || config.provider === '')) {
      throw new ConfigError(`agent '${name}': provider must be a non-empty string (a name in the worker's providers)`);
    }
    const own = checkDefinitionSettings(
      {
        tool_execution: config.tool_execution,
        loop_detection: config.loop_detection,
        model: config.model,
        budget: config.budget,
        model_settings: config.model_settings,
        model_fallbacks: config.model_fallbacks,
        output_schema: config.output_schema,
        output_retries: config.output_retries,
      },
      `agent '${name}'`,
    );
    // A tool_choice may name a tool a source has not listed yet: checked again once the sources are open.
    if (config.model_settings) checkModelSettings(config.model_settings, `agent '${name}'`, 'definition', sources.length > 0 ? undefined : [...byName.keys()]);
    const max_state_bytes = config.max_state_bytes ?? DEFAULT_MAX_STATE_BYTES;
    if (!Number.isSafeInteger(max_state_bytes) || max_state_bytes < 2) {
      throw new ConfigError(`agent '${name}': max_state_bytes must be an integer >= 2 (bytes of the state's JSON), got ${JSON.stringify(config.max_state_bytes)}`);
    }
    if (config.stream !== undefined && typeof config.stream !== 'boolean') {
      throw new ConfigError(`agent '${name}': stream must be true or false, got ${JSON.stringify(config.stream)?.slice(0, 40)}`);
    }
    this.name = name;
    this.stream = config.stream ?? false;
    this.max_state_bytes = max_state_bytes;
    this.role = config.role;
    this.instructions = config.instructions;
    this.model = config.model;
    this.tools = Object.freeze(tools);
    this.tool_sources = Object.freeze(sources);
    this.#config = { ...config, tools: [...(config.tools ?? [])] };
    this.tool_execution = Object.freeze({ ...(config.tool_execution ?? {}) });
    this.loop_detection = config.loop_detection;
    this.budget = config.budget === undefined ? undefined : Object.freeze({ ...config.budget });
    this.model_settings = config.model_settings === undefined ? undefined : Object.freeze({ ...config.model_settings });
    this.provider = config.provider;
    this.model_fallbacks = config.model_fallbacks === undefined ? undefined : Object.freeze(config.model_fallbacks.map((entry) => Object.freeze({ ...entry })));
    this.output_schema = config.output_schema;
    this.output_retries = config.output_retries;
    this.settings = resolveSettings(own);
    this.#toolsByName = byName;
    this.definition_hash = shortHash({
      name,
      role: config.role ?? null,
      instructions: config.instructions ?? null,
      model: config.model ?? null,
      tools: this.tools.map((item) => ({
        name: item.name,
        input_schema_hash: item.input_schema_hash,
        timeout_ms: item.timeout_ms,
        retries: item.retries,
        concurrency: item.concurrency ?? null,
        max_result_bytes: item.max_result_bytes,
        needs_approval: typeof item.needs_approval === 'function' ? 'per call' : item.needs_approval,
        approval_timeout_ms: item.approval_timeout_ms,
      })),
      settings: hashedSettings(this.settings),
      ...(config.provider === undefined ? {} : { provider: config.provider }),
      ...(max_state_bytes === DEFAULT_MAX_STATE_BYTES ? {} : { max_state_bytes }),
      ...(sources.length > 0 ? { tool_sources: sources.map((source) => source.identity) } : {}),
    });
  }

  /**
   * This agent with each tool source replaced, in place, by the tools it listed: the agent a worker
   * serves, whose definition hash covers those tools (names, schema hashes, limits), so a server whose
   * list changed between two workers shows as `DefinitionChanged`. Two tools of one name are refused,
   * naming where each came from.
   */
  withSourceTools(listed: ReadonlyMap<ToolSource, readonly ToolDefinition[]>): Agent {
    if (this.tool_sources.length === 0) return this;
    const byName = new Map<string, { definition: ToolDefinition; from: string }>();
    const add = (definition: ToolDefinition, from: string) => {
      const earlier = byName.get(definition.name);
      if (earlier && earlier.definition !== definition) {
        throw new ConfigError(
          `agent '${this.name}': tool '${definition.name}' from ${from} has the name of a tool from ${earlier.from}; give the source another prefix, or exclude one of them`,
        );
      }
      byName.set(definition.name, { definition, from });
    };
    for (const entry of this.#config.tools ?? []) {
      if (!isToolSource(entry)) add(entry, 'tool()');
      else {
        const definitions = listed.get(entry);
        if (!definitions) throw new ConfigError(`agent '${this.name}': the tools of ${entry.label} were not listed`);
        for (const definition of definitions) add(definition, entry.label);
      }
    }
    const tools = [...byName.values()].map((entry) => entry.definition);
    return new Agent({ ...this.#config, tools });
  }

  /** The tool of that name, if the agent has it. */
  findTool(name: string): ToolDefinition | undefined {
    return this.#toolsByName.get(name);
  }

  /** Settings for one run: the run's config overrides the agent's, key by key. */
  settingsFor(config?: unknown): StepSettings {
    // Most runs bring no config: the agent's own settings, resolved once.
    if (config === undefined || config === null) return this.settings;
    const override = checkRunConfig(config);
    if (override.model_settings) checkToolChoice(override.model_settings, [...this.#toolsByName.keys()], 'config.model_settings');
    return resolveSettings(
      {
        tool_execution: this.tool_execution,
        loop_detection: this.loop_detection,
        model: this.model,
        budget: this.budget,
        model_settings: this.model_settings,
        model_fallbacks: this.model_fallbacks,
        output_schema: this.output_schema,
        output_retries: this.output_retries,
      },
      override,
    );
  }
}

/**
 * The settings as the definition hash sees them: model settings, fallbacks and the output schema
 * (by its hash, with its retries) only when set, so an agent that uses none of them keeps the hash
 * it had before they existed (no `DefinitionChanged` for it on the deploy that brings them).
 */
function hashedSettings(settings: StepSettings): object {
  const { model_settings, model_fallbacks, output, ...rest } = settings;
  return {
    ...rest,
    ...(Object.keys(model_settings).length > 0 ? { model_settings } : {}),
    ...(model_fallbacks.length > 0 ? { model_fallbacks } : {}),
    ...(output ? { output: { schema_hash: output.schema_hash, retries: output.retries } } : {}),
  };
}

/** An agent's `tools` entry by entry: its tools (each name once), by name, and its tool sources (each once). */
function sortTools(name: string, entries: readonly (ToolDefinition | ToolSource)[]): { tools: ToolDefinition[]; sources: ToolSource[]; byName: Map<string, ToolDefinition> } {
  const tools: ToolDefinition[] = [];
  const sources: ToolSource[] = [];
  const byName = new Map<string, ToolDefinition>();
  for (const definition of entries) {
    if (isToolSource(definition)) {
      if (!sources.includes(definition)) sources.push(definition);
      continue;
    }
    if (definition?.kind !== 'tool') throw new ConfigError(`agent '${name}': every entry of tools must come from tool() or mcpTools()`);
    tools.push(definition);
    if (byName.has(definition.name)) throw new ConfigError(`agent '${name}': duplicate tool '${definition.name}'`);
    byName.set(definition.name, definition);
  }
  return { tools, sources, byName };
}
