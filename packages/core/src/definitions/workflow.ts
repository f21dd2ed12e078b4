import { ConfigError } from '../errors.ts';
import { Agent } from './agent.ts';

export interface WorkflowStepConfig {
  id: string;
  agent: Agent;
  depends_on?: readonly string[];
}

export interface WorkflowConfig {
  name: string;
  steps: readonly WorkflowStepConfig[];
}

/**
 * A DAG of agent steps. Checked at definition time: duplicate step ids, unknown dependencies and
 * cycles are refused with an error that names them. (Execution comes with the workflow engine.)
 */
export class Workflow {
  readonly kind = 'workflow' as const;
  readonly name: string;
  readonly steps: readonly Readonly<Required<WorkflowStepConfig>>[];

  constructor(config: WorkflowConfig) {
    if (typeof config?.name !== 'string' || config.name === '') throw new ConfigError('workflow name must be a non-empty string');
    const name = config.name;
    if (!Array.isArray(config.steps) || config.steps.length === 0) throw new ConfigError(`workflow '${name}': steps must be a non-empty array`);
    const ids = new Set<string>();
    for (const step of config.steps) {
      if (typeof step.id !== 'string' || step.id === '') throw new ConfigError(`workflow '${name}': every step needs an id`);
      if (ids.has(step.id)) throw new ConfigError(`workflow '${name}': duplicate step id '${step.id}'`);
      if (!(step.agent instanceof Agent)) throw new ConfigError(`workflow '${name}': step '${step.id}' needs an Agent`);
      ids.add(step.id);
    }
    for (const step of config.steps) {
      for (const dependency of step.depends_on ?? []) {
        if (!ids.has(dependency)) throw new ConfigError(`workflow '${name}': step '${step.id}' depends on unknown step '${dependency}'`);
      }
    }
    const cycle = findCycle(config.steps);
    if (cycle) throw new ConfigError(`workflow '${name}': dependency cycle ${cycle.join(' -> ')}`);
    this.name = name;
    this.steps = Object.freeze(config.steps.map((step) => Object.freeze({ ...step, depends_on: [...(step.depends_on ?? [])] })));
  }
}

/** A cycle as a list of step ids (first id repeated at the end), or undefined. */
function findCycle(steps: readonly WorkflowStepConfig[]): string[] | undefined {
  const dependencies = new Map(steps.map((step) => [step.id, step.depends_on ?? []]));
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (id: string): string[] | undefined => {
    if (state.get(id) === 'done') return undefined;
    if (state.get(id) === 'visiting') return [...path.slice(path.indexOf(id)), id];
    state.set(id, 'visiting');
    path.push(id);
    for (const dependency of dependencies.get(id) ?? []) {
      const cycle = visit(dependency);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(id, 'done');
    return undefined;
  };
  for (const step of steps) {
    const cycle = visit(step.id);
    if (cycle) return cycle;
  }
  return undefined;
}
