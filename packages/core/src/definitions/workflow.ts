import { shortHash } from '../canonical.ts';
import { ConfigError } from '../errors.ts';
import { NamePattern } from '../names.ts';
import type { ToolDefinition } from '../tools/define.ts';
import { type GraphStep, RUN_STEP_ID, type WorkflowGraph, findCycle } from '../workflow/graph.ts';
import { Agent } from './agent.ts';
import { childOf } from './agent-tool.ts';
import { type KnownKeys, checkKnownKeys } from './known-keys.ts';

/** What a step's `input` or `args` function is given: the run input and its dependencies' outputs, by step id. */
export interface StepInputs {
  readonly input: string;
  readonly outputs: Readonly<Record<string, string>>;
}

interface StepConfigBase {
  id: string;
  depends_on?: readonly string[];
}

/** A whole tool loop of `agent`, under the step's id. */
export interface AgentStepConfig extends StepConfigBase {
  agent: Agent;
  /** The step's input; by default the run input, then each dependency's output under `[<step_id>]`. */
  input?: (inputs: StepInputs) => string;
}

/** One execution of `tool`, with no model call. */
export interface ToolStepConfig extends StepConfigBase {
  tool: ToolDefinition;
  /** The call's arguments, validated against the tool's schema; by default the run input parsed as JSON. */
  args?: (inputs: StepInputs) => unknown;
}

export type WorkflowStepConfig = AgentStepConfig | ToolStepConfig;

/** The keys of either kind of step; a key of the other kind is refused by name in `checkStep`. */
const STEP_KEYS = { id: true, depends_on: true, agent: true, input: true, tool: true, args: true } as const satisfies KnownKeys<WorkflowStepConfig>;

export type StepFailurePolicy = 'continue' | 'fail_fast';

export interface WorkflowConfig {
  name: string;
  steps: readonly WorkflowStepConfig[];
  /** `continue` (default): a failure skips only the steps that depend on it; `fail_fast`: it ends the run. */
  on_step_failure?: StepFailurePolicy;
}

/** The keys of {@link WorkflowConfig}: any other is refused, naming the nearest of these. */
const WORKFLOW_KEYS = { name: true, steps: true, on_step_failure: true } as const satisfies KnownKeys<WorkflowConfig>;

export type WorkflowStep =
  | { readonly type: 'agent'; readonly id: string; readonly depends_on: readonly string[]; readonly agent: Agent; readonly input?: AgentStepConfig['input'] }
  | { readonly type: 'tool'; readonly id: string; readonly depends_on: readonly string[]; readonly tool: ToolDefinition; readonly args?: ToolStepConfig['args'] };

/**
 * A DAG of agent steps and tool steps, run like an agent (SPEC §7). Checked here: names, step ids,
 * that each step has exactly one of `agent` and `tool`, unknown dependencies and cycles, each
 * refused with an error that names them.
 */
export class Workflow {
  readonly kind = 'workflow' as const;
  readonly name: string;
  readonly steps: readonly WorkflowStep[];
  readonly on_step_failure: StepFailurePolicy;
  /** The shape the scheduler decides on: ids, types and dependencies (also what workers register). */
  readonly graph: WorkflowGraph;
  /** 16 hex characters over the graph, each agent step's definition hash and each tool step's tool and functions. */
  readonly definition_hash: string;
  readonly #byId: ReadonlyMap<string, WorkflowStep>;
  readonly #config: WorkflowConfig;

  constructor(config: WorkflowConfig) {
    const name = config?.name;
    if (typeof name !== 'string' || !NamePattern.agent.test(name)) throw new ConfigError(`workflow name must match ${NamePattern.agent}, got ${JSON.stringify(name)}`);
    checkKnownKeys(config, WORKFLOW_KEYS, `workflow '${name}'`, 'definition');
    if (!Array.isArray(config.steps) || config.steps.length === 0) throw new ConfigError(`workflow '${name}': steps must be a non-empty array`);
    const policy = config.on_step_failure ?? 'continue';
    if (policy !== 'continue' && policy !== 'fail_fast') {
      throw new ConfigError(`workflow '${name}': on_step_failure must be 'continue' or 'fail_fast', got ${JSON.stringify(policy)}`);
    }
    const byId = new Map<string, WorkflowStep>();
    for (const [index, step] of config.steps.entries()) {
      const checked = checkStep(name, step, index);
      if (byId.has(checked.id)) throw new ConfigError(`workflow '${name}': duplicate step id '${checked.id}'`);
      byId.set(checked.id, checked);
    }
    for (const step of byId.values()) {
      for (const dependency of step.depends_on) {
        if (!byId.has(dependency)) throw new ConfigError(`workflow '${name}': step '${step.id}' depends on unknown step '${dependency}'`);
      }
    }
    const graphSteps: GraphStep[] = [...byId.values()].map((step) => ({
      id: step.id,
      type: step.type,
      depends_on: step.depends_on,
      ...(step.type === 'agent' ? { tools: step.agent.tools.map((tool) => tool.name) } : {}),
    }));
    const cycle = findCycle(graphSteps);
    if (cycle) throw new ConfigError(`workflow '${name}': dependency cycle ${cycle.join(' -> ')}`);
    this.name = name;
    this.steps = Object.freeze([...byId.values()]);
    this.on_step_failure = policy;
    this.graph = Object.freeze({ name, on_step_failure: policy, steps: Object.freeze(graphSteps) });
    this.#byId = byId;
    this.#config = config;
    this.definition_hash = shortHash({
      name,
      on_step_failure: policy,
      steps: this.steps.map((step) =>
        step.type === 'agent'
          ? { id: step.id, depends_on: step.depends_on, agent: step.agent.definition_hash, input: step.input?.toString() ?? null }
          : {
              id: step.id,
              depends_on: step.depends_on,
              tool: [step.tool.name, step.tool.input_schema_hash, step.tool.timeout_ms, step.tool.retries],
              args: step.args?.toString() ?? null,
            },
      ),
    });
  }

  /** The step of that id, if the workflow has it. */
  step(id: string): WorkflowStep | undefined {
    return this.#byId.get(id);
  }

  /** This workflow with its agent steps' agents replaced as `agents` maps them (agents whose tool sources were opened). */
  withAgents(agents: ReadonlyMap<Agent, Agent>): Workflow {
    if (!this.agents.some((agent) => agents.has(agent))) return this;
    const steps = this.#config.steps.map((step) => ('agent' in step && step.agent && agents.has(step.agent) ? { ...step, agent: agents.get(step.agent) as Agent } : step));
    return new Workflow({ ...this.#config, steps });
  }

  /** The agents of its agent steps, each once. */
  get agents(): Agent[] {
    return [...new Set(this.steps.flatMap((step) => (step.type === 'agent' ? [step.agent] : [])))];
  }

  /** Every tool a worker serving it must run: its agents' tools and its tool steps' tools, each once. */
  get tools(): ToolDefinition[] {
    return [...new Set(this.steps.flatMap((step) => (step.type === 'agent' ? step.agent.tools : [step.tool])))];
  }
}

function checkStep(workflow: string, step: WorkflowStepConfig, index: number): WorkflowStep {
  const where = `workflow '${workflow}'`;
  if (step === null || typeof step !== 'object') throw new ConfigError(`${where}: every step must be an object`);
  // Before the id's own check, so a misspelt `id` is named as such; a step without an id is named by its place.
  const named = typeof step.id === 'string' ? `step '${step.id}'` : `steps[${index}]`;
  checkKnownKeys(step, STEP_KEYS, `${named} of ${where}`, 'definition');
  const id = step.id;
  if (typeof id !== 'string' || !NamePattern.stepId.test(id)) throw new ConfigError(`${where}: step id must match ${NamePattern.stepId}, got ${JSON.stringify(id)}`);
  if (id === RUN_STEP_ID) throw new ConfigError(`${where}: '${RUN_STEP_ID}' is reserved for the run's own events; pick another step id`);
  const depends_on = step.depends_on ?? [];
  if (!Array.isArray(depends_on) || depends_on.some((dependency) => typeof dependency !== 'string')) {
    throw new ConfigError(`${where}: step '${id}': depends_on must be a list of step ids`);
  }
  if (new Set(depends_on).size !== depends_on.length) throw new ConfigError(`${where}: step '${id}' lists a dependency twice`);
  const hasAgent = 'agent' in step && step.agent !== undefined;
  const hasTool = 'tool' in step && step.tool !== undefined;
  if (hasAgent === hasTool) throw new ConfigError(`${where}: step '${id}' needs exactly one of 'agent' (an Agent) and 'tool' (from tool())`);
  if (hasAgent) {
    const { agent, input } = step as AgentStepConfig;
    if (!(agent instanceof Agent)) throw new ConfigError(`${where}: step '${id}': agent must be an Agent`);
    if (input !== undefined && typeof input !== 'function') throw new ConfigError(`${where}: step '${id}': input must be a function`);
    if ('args' in step && step.args !== undefined) throw new ConfigError(`${where}: step '${id}' is an agent step; 'args' belongs to tool steps`);
    return Object.freeze({ type: 'agent', id, depends_on: Object.freeze([...depends_on]), agent, ...(input ? { input } : {}) });
  }
  const { tool, args } = step as ToolStepConfig;
  if (tool?.kind !== 'tool') throw new ConfigError(`${where}: step '${id}': tool must come from tool()`);
  if (tool.external) {
    throw new ConfigError(`${where}: step '${id}': tool '${tool.name}' has no handler: an external tool's call waits for a result from outside, which a tool step cannot`);
  }
  if (childOf(tool)) throw new ConfigError(`${where}: step '${id}': '${tool.name}' is an agent tool; make the step an agent step ({ agent }) instead`);
  if (args !== undefined && typeof args !== 'function') throw new ConfigError(`${where}: step '${id}': args must be a function`);
  if ('input' in step && step.input !== undefined) throw new ConfigError(`${where}: step '${id}' is a tool step; 'input' belongs to agent steps`);
  return Object.freeze({ type: 'tool', id, depends_on: Object.freeze([...depends_on]), tool, ...(args ? { args } : {}) });
}
