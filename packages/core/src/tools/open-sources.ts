import type { Agent } from '../definitions/agent.ts';
import { Workflow } from '../definitions/workflow.ts';
import type { ToolDefinition, ToolLogger } from './define.ts';
import type { SessionResource, ToolSource, ToolSourceSession } from './source.ts';

/** Definitions whose tool sources are open, and how to close what opening them started. */
export interface OpenedDefinitions<D extends Agent | Workflow> {
  /** The definitions given, each agent with sources replaced by one that has their tools (workflows with such agents too). */
  readonly definitions: readonly D[];
  /** Closes the sources' connections (MCP clients, their child processes); safe to call twice. */
  close(): Promise<void>;
}

/**
 * Opens every tool source of the given agents and workflows' agents, once per source (in parallel),
 * in one `ToolSourceSession` whose resources the sources share (one MCP client per server). A source that
 * cannot answer fails the whole call with its error, after closing what the others opened.
 * Definitions without sources come back as they are, and nothing is opened for them.
 */
export async function openToolSources<D extends Agent | Workflow>(definitions: readonly D[], options: { logger: ToolLogger }): Promise<OpenedDefinitions<D>> {
  const agents = new Set<Agent>();
  for (const definition of definitions) {
    for (const agent of definition instanceof Workflow ? definition.agents : [definition as Agent]) if (agent.tool_sources.length > 0) agents.add(agent);
  }
  if (agents.size === 0) return { definitions, close: async () => undefined };
  const resources = new Map<string, SessionResource>();
  const session: ToolSourceSession = {
    logger: options.logger,
    resource<T extends SessionResource>(key: string, make: () => T): T {
      let resource = resources.get(key);
      if (!resource) {
        resource = make();
        resources.set(key, resource);
      }
      return resource as T;
    },
  };
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= Promise.allSettled([...resources.values()].map((resource) => resource.close())).then(() => undefined);
    return closing;
  };
  try {
    const sources = [...new Set([...agents].flatMap((agent) => agent.tool_sources))];
    const results = await Promise.allSettled(sources.map((source) => source.open(session)));
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    const listed = new Map<ToolSource, readonly ToolDefinition[]>(
      sources.map((source, index) => [source, (results[index] as PromiseFulfilledResult<readonly ToolDefinition[]>).value]),
    );
    const replaced = new Map<Agent, Agent>([...agents].map((agent) => [agent, agent.withSourceTools(listed)]));
    const opened = definitions.map((definition) => (definition instanceof Workflow ? definition.withAgents(replaced) : (replaced.get(definition as Agent) ?? definition)) as D);
    return { definitions: opened, close };
  } catch (error) {
    await close();
    throw error;
  }
}
