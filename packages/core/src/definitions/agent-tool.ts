import { shortHash } from '../canonical.ts';
import type { RunInput } from '../conversation/messages.ts';
import { ConfigError } from '../errors.ts';
import { NamePattern } from '../names.ts';
import { type ToolDefinition, type ToolOptions, resolveToolOptions } from '../tools/define.ts';
import { compileSchema } from '../tools/schema.ts';
import type { JsonSchema } from '../vocabulary/json-schema.ts';
import { type RunSpent, microsOf, usdOf } from '../vocabulary/tokens.ts';
import { Agent } from './agent.ts';
import { type KnownKeys, checkKnownKeys } from './known-keys.ts';
import type { BudgetConfig, ResolvedBudget } from './settings.ts';

/** How deep children may nest by default: a run's child is at depth 1, its grandchild at 2 (SPEC §13). */
export const DEFAULT_MAX_DEPTH = 4;

/** How many more times a call's job tries to start its child after a failed write (a child is started once whatever the tries). */
export const AGENT_TOOL_START_RETRIES = 3;

/** The schema of an agent tool's arguments unless it is given one: the child run's input, as text. */
export const AGENT_TOOL_INPUT_SCHEMA: JsonSchema = Object.freeze({
  type: 'object',
  properties: { input: { type: 'string', description: 'What to ask the agent' } },
  required: ['input'],
  additionalProperties: false,
});

/** How an agent is offered as a tool (SPEC §13). */
export interface AgentToolConfig {
  /** The tool's name (default: the agent's name, with `.` made `_`). */
  name?: string;
  /** What the model reads about the tool (default: the agent's role, else a sentence naming it). */
  description?: string;
  /** The arguments' schema (default `{ input: string }`); with one of its own, the child's input is the arguments as JSON text. */
  input_schema?: JsonSchema;
  /** Deepest a child of this tool may be, counting from the run that has no parent (default 4): a call deeper fails. */
  max_depth?: number;
  needs_approval?: ToolOptions['needs_approval'];
  approval_timeout_ms?: number;
  max_result_bytes?: number;
}

const AGENT_TOOL_KEYS = {
  name: true,
  description: true,
  input_schema: true,
  max_depth: true,
  needs_approval: true,
  approval_timeout_ms: true,
  max_result_bytes: true,
} as const satisfies KnownKeys<AgentToolConfig>;

/** What a call of an agent tool starts: a child run of `agent`, at most `max_depth` deep. */
export interface ChildAgent {
  readonly agent: Agent;
  readonly max_depth: number;
  /** The child run's input for the call's (valid) arguments. */
  readonly input: (args: unknown) => RunInput;
}

/** The child each agent tool starts, by the tool's definition: a tool knows nothing of agents. */
const children = new WeakMap<ToolDefinition, ChildAgent>();

/** What a call of `tool` starts (SPEC §13): a child run, for an agent tool (`agentTool`); `undefined` for any other tool. */
export function childOf(tool: ToolDefinition): ChildAgent | undefined {
  return children.get(tool);
}

/**
 * Makes an agent callable as a tool: a call starts a child run of it, and the child's answer is
 * the call's result (SPEC §13). The engine runs the child on any worker that serves the agent,
 * `runLocal` in its own process; the tool's handler is never called.
 */
export function agentTool(agent: Agent, config: AgentToolConfig = {}): ToolDefinition {
  if (!(agent instanceof Agent)) throw new ConfigError('agentTool: the first argument must be an Agent');
  const name = config.name ?? agent.name.replaceAll('.', '_');
  if (typeof name !== 'string' || !NamePattern.tool.test(name)) {
    throw new ConfigError(`agentTool '${agent.name}': name must match ${NamePattern.tool} (letters, digits, _ and -), got ${JSON.stringify(name)}`);
  }
  const where = `agentTool '${name}'`;
  checkKnownKeys(config, AGENT_TOOL_KEYS, where, 'definition');
  const description = config.description ?? agent.role ?? `Ask the agent '${agent.name}'; it answers in text`;
  if (typeof description !== 'string') throw new ConfigError(`${where}: description must be a string`);
  const input_schema = config.input_schema ?? AGENT_TOOL_INPUT_SCHEMA;
  const check = compileSchema(`${where}: input_schema`, input_schema);
  const max_depth = config.max_depth ?? DEFAULT_MAX_DEPTH;
  if (!Number.isSafeInteger(max_depth) || max_depth < 1) throw new ConfigError(`${where}: max_depth must be an integer >= 1, got ${JSON.stringify(config.max_depth)}`);
  const options = resolveToolOptions(where, {
    needs_approval: config.needs_approval,
    approval_timeout_ms: config.approval_timeout_ms,
    max_result_bytes: config.max_result_bytes,
  });
  const ownSchema = config.input_schema !== undefined;
  const child: ChildAgent = Object.freeze({
    agent,
    max_depth,
    input: (args: unknown) => (ownSchema ? JSON.stringify(args) : (args as { input: string }).input),
  });
  const definition: ToolDefinition = Object.freeze({
    kind: 'tool' as const,
    name,
    description,
    input_schema,
    input_schema_hash: shortHash(input_schema),
    ...options,
    external: false,
    // The child is never run twice. Starting it is tried again when a write fails: every try finds the same child.
    retries: AGENT_TOOL_START_RETRIES,
    handler: () => {
      throw new Error(`agent tool '${name}' starts a child run; its handler is never called`);
    },
    check,
  });
  children.set(definition, child);
  return definition;
}

/** The agents a set of agents reaches through their agent tools, at any depth, each once (by identity). */
export function childAgentsOf(agents: Iterable<Agent>): Agent[] {
  const seen = new Set<Agent>();
  const queue = [...agents];
  const found: Agent[] = [];
  while (queue.length > 0) {
    const agent = queue.shift()!;
    for (const tool of agent.tools) {
      const child = childOf(tool)?.agent;
      if (!child || seen.has(child)) continue;
      seen.add(child);
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** A parent's budget caps, as a call's job carries them to the child it starts. */
export type BudgetCaps = Pick<BudgetConfig, 'max_total_tokens' | 'max_tool_calls' | 'max_cost_usd'>;

/**
 * The budget a child run starts with (SPEC §10, §13): what its parent's caps leave after what
 * the parent has spent so far (its children's spend included), or its own agent's caps where
 * those are lower. Undefined when the parent has no caps: the child's agent decides alone. Calls
 * of one turn each get what is left when they start, so children running side by side can
 * together spend more than is left; their spend counts toward the parent's budget either way.
 */
export function childBudget(parent: BudgetCaps | ResolvedBudget | undefined, spent: RunSpent, own: BudgetConfig | undefined): BudgetConfig | undefined {
  if (!parent || (parent.max_total_tokens === undefined && parent.max_tool_calls === undefined && parent.max_cost_usd === undefined)) return undefined;
  const lower = (cap: number | undefined, used: number, mine: number | undefined) => {
    const left = cap === undefined ? undefined : Math.max(0, cap - used);
    return left === undefined ? mine : mine === undefined ? left : Math.min(left, mine);
  };
  const max_total_tokens = lower(parent.max_total_tokens, spent.tokens, own?.max_total_tokens);
  const max_tool_calls = lower(parent.max_tool_calls, spent.tool_calls, own?.max_tool_calls);
  // Whole micro-dollars, so what is left is exact.
  const max_cost_usd = lower(
    parent.max_cost_usd === undefined ? undefined : microsOf(parent.max_cost_usd),
    spent.cost_micros ?? 0,
    own?.max_cost_usd === undefined ? undefined : microsOf(own.max_cost_usd),
  );
  return {
    ...(max_cost_usd !== undefined ? { max_cost_usd: usdOf(max_cost_usd) } : {}),
    ...(max_total_tokens !== undefined ? { max_total_tokens } : {}),
    ...(max_tool_calls !== undefined ? { max_tool_calls } : {}),
    ...(own?.on_exceeded ? { on_exceeded: own.on_exceeded } : {}),
  };
}
