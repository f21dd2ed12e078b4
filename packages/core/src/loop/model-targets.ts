import type { Agent } from '../definitions/agent.ts';
import type { StepSettings } from '../definitions/settings.ts';
import { ConfigError } from '../errors.ts';
import type { ModelProvider, ProviderRequest } from '../provider.ts';

/**
 * One model a provider call may go to: the agent's own (entry 0), then each of its
 * `model_fallbacks` in order (SPEC §16). `provider` is a name in the worker's providers, or
 * undefined for the worker's default provider.
 */
export interface ModelTarget {
  readonly entry: number;
  readonly provider: string | undefined;
  /** Undefined when neither the run nor the agent names a model: the worker's default, else the provider's. */
  readonly model: string | undefined;
  /** A fallback the run's own `config.model_fallbacks` gave (the agent's were checked when the worker started). */
  readonly from_run?: true;
}

/** The models a step's calls may go to, in the order they are tried. */
export function modelTargets(agent: Agent, settings: StepSettings): readonly ModelTarget[] {
  const primary: ModelTarget = { entry: 0, provider: agent.provider, model: settings.model };
  const fromRun = settings !== agent.settings && JSON.stringify(settings.model_fallbacks) !== JSON.stringify(agent.settings.model_fallbacks);
  return [
    primary,
    ...settings.model_fallbacks.map((fallback, index) => ({
      entry: index + 1,
      provider: fallback.provider ?? agent.provider,
      model: fallback.model,
      ...(fromRun ? { from_run: true as const } : {}),
    })),
  ];
}

/**
 * The request for one target: the same messages, tools and settings, to that target's model; else,
 * for a named provider, that provider's own model; else the worker's default model, else the
 * default provider's own, else `default`.
 */
export function requestFor(request: ProviderRequest, target: ModelTarget, defaultModel: string | undefined, provider: ModelProvider | undefined): ProviderRequest {
  // A named provider's own model comes before the worker's default: that default is meant for the default provider.
  const providerModel = target.provider === undefined ? undefined : provider?.defaultModel;
  return { ...request, model: target.model ?? providerModel ?? defaultModel ?? provider?.defaultModel ?? 'default' };
}

/**
 * The provider a target names, or a clear refusal naming whose choice it was: `agent 'writer' uses
 * provider 'fast', which this worker does not hold (it holds: local)`, or for a fallback of the
 * run's own config, `the run's config.model_fallbacks[0] (agent 'writer') uses provider 'fast', …`.
 */
export function providerFor(target: ModelTarget, providers: Readonly<Record<string, ModelProvider>>, defaultProvider: ModelProvider | undefined, agentName: string): ModelProvider {
  if (target.provider === undefined) {
    if (!defaultProvider) throw new ConfigError(`agent '${agentName}' needs a provider: this worker has no default provider`);
    return defaultProvider;
  }
  const provider = Object.hasOwn(providers, target.provider) ? providers[target.provider] : undefined;
  if (!provider) {
    const held = Object.keys(providers);
    throw new ConfigError(
      `${target.from_run ? `the run's config.model_fallbacks[${target.entry - 1}] (agent '${agentName}')` : `agent '${agentName}'`} uses provider '${target.provider}', which this worker does not hold (${held.length > 0 ? `it holds: ${held.join(', ')}` : 'it holds no named providers'})`,
    );
  }
  return provider;
}
