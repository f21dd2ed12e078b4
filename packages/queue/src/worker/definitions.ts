import { type Agent, ConfigError, type ToolDefinition, type ToolLogger, Workflow, childAgentsOf } from '@arcflow/core';
import type { Registry } from '../records/registry.ts';
import { nearestName } from '../records/nearest-name.ts';
import type { WorkerOptions } from '../config/options.ts';

/** Agents (with every workflow's agents) and workflows by name; one name means one definition. */
export function collectDefinitions(definitions: WorkerOptions['agents']): { agents: Map<string, Agent>; workflows: Map<string, Workflow> } {
  const agents = new Map<string, Agent>();
  const workflows = new Map<string, Workflow>();
  const addAgent = (agent: Agent) => {
    const existing = agents.get(agent.name);
    if (existing && existing !== agent) throw new ConfigError(`two different agents are named '${agent.name}'`);
    agents.set(agent.name, agent);
  };
  for (const definition of definitions) {
    if (definition instanceof Workflow) {
      const existing = workflows.get(definition.name);
      if (existing && existing !== definition) throw new ConfigError(`two different workflows are named '${definition.name}'`);
      workflows.set(definition.name, definition);
      definition.agents.forEach(addAgent);
    } else addAgent(definition);
  }
  // The agents of agent tools are served too (SPEC §13), unless one of that name is given: the given one is served.
  for (const child of childAgentsOf(agents.values())) {
    if (agents.has(child.name) || workflows.has(child.name)) continue;
    if (child.tool_sources.length > 0) throw new ConfigError(`agent '${child.name}' (an agent tool's) lists tool sources: give it to the worker too, so its sources are opened`);
    agents.set(child.name, child);
  }
  for (const name of workflows.keys()) {
    if (agents.has(name)) throw new ConfigError(`'${name}' names both an agent and a workflow; agents and workflows share one namespace`);
  }
  if (agents.size === 0 && workflows.size === 0) throw new ConfigError('a worker needs at least one agent');
  return { agents, workflows };
}

/** Tool names are queue names, so one name must mean one definition across the served agents and tool steps. */
export function collectTools(agents: ReadonlyMap<string, Agent>, workflows: ReadonlyMap<string, Workflow>, only: readonly string[] | undefined): Map<string, ToolDefinition> {
  const tools = new Map<string, ToolDefinition>();
  const all = [...[...agents.values()].flatMap((agent) => agent.tools), ...[...workflows.values()].flatMap((workflow) => workflow.tools)];
  for (const tool of all) {
    const existing = tools.get(tool.name);
    if (existing && existing !== tool) throw new ConfigError(`two different tools are named '${tool.name}' (a worker finds a call's tool by its name)`);
    tools.set(tool.name, tool);
  }
  if (only) {
    const unknown = only.filter((name) => !tools.has(name));
    if (unknown.length > 0) {
      const named = unknown.map((name) => {
        const nearest = nearestName(name, [...tools.keys()]);
        return nearest ? `${name} (did you mean '${nearest}'?)` : name;
      });
      throw new ConfigError(`--tools names tools no served agent has: ${named.join(', ')}`);
    }
    for (const name of [...tools.keys()]) if (!only.includes(name)) tools.delete(name);
  }
  return tools;
}

/**
 * Says (`warn`) which live workers on the prefix hold another definition of one of this worker's
 * tools' names: each definition has its own queue, so calls never cross, but a run's calls wait for a
 * worker of the definition it was planned with.
 */
export async function warnOfOtherDefinitions(registry: Registry, worker_id: string, heldTools: ReadonlyMap<string, string>, logger: ToolLogger): Promise<void> {
  for (const clash of await registry.otherDefinitions(worker_id, heldTools)) {
    logger.warn(`another live worker on this prefix defines tool '${clash.tool_name}' differently: each definition's calls run only on workers holding it`, {
      tool: clash.tool_name,
      definition_hash: clash.definition_hash,
      other_workers: clash.others.map((other) => `${other.worker_id} (${other.definition_hash})`),
    });
  }
}
