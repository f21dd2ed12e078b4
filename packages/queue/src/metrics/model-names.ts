import { type Agent, type ModelProvider, type Workflow, modelTargets } from '@arcflow/core';

/**
 * Every model name a worker's definitions and providers name: its agents' (and workflow steps')
 * models and fallbacks, its providers' default models, its own default model, and `default`.
 * A provider call's metrics name its model only when it is one of these (SPEC §18); a model given
 * per run that none names is recorded as `_OTHER`.
 */
export function definedModelNames(
  agents: Iterable<Agent>,
  workflows: Iterable<Workflow>,
  providers: { readonly provider?: ModelProvider | undefined; readonly providers: Readonly<Record<string, ModelProvider>>; readonly default_model?: string | undefined },
): Set<string> {
  const names = new Set<string>(['default']);
  const add = (name: string | undefined) => {
    if (name !== undefined) names.add(name);
  };
  add(providers.default_model);
  add(providers.provider?.defaultModel);
  for (const provider of Object.values(providers.providers)) add(provider.defaultModel);
  const stepAgents = [...workflows].flatMap((workflow) => workflow.steps.flatMap((step) => (step.type === 'agent' ? [step.agent] : [])));
  for (const agent of [...agents, ...stepAgents]) for (const target of modelTargets(agent, agent.settings)) add(target.model);
  return names;
}
