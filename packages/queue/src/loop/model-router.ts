import {
  type Agent,
  ConfigError,
  type ModelProvider,
  type ProviderRequest,
  type RunError,
  type StepSettings,
  type StepState,
  TEST_PROVIDER_ID,
  type TestTurn,
  buildRequest,
  modelTargets,
  providerFor,
  requestFor,
  stepRunError,
  type TryPosition,
} from '@arcflow/core';
import { attemptsOf } from '../jobs/jobs.ts';

/** One try of a provider call: who answers it, with what request, and where the try stands among the step's models. */
export interface PreparedCall {
  /** Undefined in test mode: the run's scripted turns answer. */
  readonly provider: ModelProvider | undefined;
  readonly provider_id: string;
  readonly request: ProviderRequest;
  readonly test: { readonly responses: readonly TestTurn[] } | undefined;
  /** Where the call stands: this try's entry among the step's models, its failed tries there, its 429 waits. */
  readonly position: TryPosition;
  /** This try's number at its target (1 for the first). */
  readonly attempt: number;
  /** How many tries each target gets. */
  readonly attemptsPerTarget: number;
  /** The provider id of each of the step's models, in order (the agent's own, then each `model_fallbacks` entry). */
  readonly provider_ids: readonly string[];
}

/** What a provider job's step gives the router: its agent, settings, test mode and its job's attempts. */
export interface CallSite {
  readonly agent: Agent;
  readonly settings: StepSettings;
  readonly test: { readonly responses: readonly TestTurn[] } | undefined;
  /** The job's attempts in all (each of the step's models gets an equal share). */
  readonly job: { readonly opts: { readonly attempts?: number } };
}

/**
 * Refuses a served agent whose provider this worker lacks, its own or a fallback's, with the
 * one-line ConfigError that names the agent and the provider (SPEC §16); an agent that names
 * none, on a worker with no default provider, is refused as needing one.
 */
export function checkProvidersHeld(
  options: { readonly provider: ModelProvider | undefined; readonly providers: Readonly<Record<string, ModelProvider>> },
  agents: Iterable<Agent>,
): void {
  for (const agent of agents) for (const target of modelTargets(agent, agent.settings)) providerFor(target, options.providers, options.provider, agent.name);
}

/**
 * The ids that two different providers of a worker share (its default one named `default`), each
 * with the names that hold it. A 429 pauses a provider by its id, on every worker, and events name
 * it by its id (SPEC §16), so providers that share one are paused together and cannot be told apart.
 */
export function sharedProviderIds(options: {
  readonly provider: ModelProvider | undefined;
  readonly providers: Readonly<Record<string, ModelProvider>>;
}): { readonly id: string; readonly names: readonly string[] }[] {
  const held: [string, ModelProvider][] = [...(options.provider ? [['default', options.provider] as [string, ModelProvider]] : []), ...Object.entries(options.providers)];
  const byId = new Map<string, Map<ModelProvider, string>>();
  for (const [name, provider] of held) {
    const same = byId.get(provider.id) ?? new Map<ModelProvider, string>();
    if (!same.has(provider)) same.set(provider, name);
    byId.set(provider.id, same);
  }
  return [...byId].filter(([, same]) => same.size > 1).map(([id, same]) => ({ id, names: [...same.values()] }));
}

/**
 * Where a worker's model calls go (SPEC §16): each agent's provider (a named one, else the
 * worker's default) and each of its fallbacks in turn. The worker checks the providers its agents
 * name before it builds this (checkProvidersHeld).
 */
export class ModelRouter {
  constructor(
    private readonly options: {
      readonly provider: ModelProvider | undefined;
      readonly providers: Readonly<Record<string, ModelProvider>>;
      readonly default_model: string | undefined;
    },
  ) {}

  /**
   * The request for the try of call `n` at `position` (the entry its failed tries have moved it
   * to) and who answers it, or test mode's script. An error when the run's own `model_fallbacks`
   * name a provider this worker lacks.
   */
  prepare(site: CallSite, state: StepState, position: TryPosition): PreparedCall | { readonly error: RunError } {
    const { agent, settings, test, job } = site;
    const base = buildRequest(agent, state, settings, this.options.default_model ?? 'default');
    const targets = modelTargets(agent, settings);
    if (test) {
      // Test mode's turns stand for the agent's own model; fallbacks are never needed.
      return {
        provider: undefined,
        provider_id: TEST_PROVIDER_ID,
        request: requestFor(base, targets[0]!, this.options.default_model, this.primaryOf(agent)),
        test,
        position: { ...position, entry: 0 },
        attempt: position.failures + 1,
        attemptsPerTarget: attemptsOf(job),
        provider_ids: [TEST_PROVIDER_ID],
      };
    }
    let providers: ModelProvider[];
    try {
      providers = targets.map((target) => providerFor(target, this.options.providers, this.options.provider, agent.name));
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      return { error: stepRunError('unknown_provider', error.message) };
    }
    // A position past the list (the run's config listed more fallbacks when it was written) stays on the last.
    const entry = Math.min(position.entry, targets.length - 1);
    const provider = providers[entry]!;
    return {
      provider,
      provider_id: provider.id,
      request: requestFor(base, targets[entry]!, this.options.default_model, provider),
      test: undefined,
      position: { ...position, entry },
      attempt: position.failures + 1,
      attemptsPerTarget: Math.max(1, Math.floor(attemptsOf(job) / targets.length)),
      provider_ids: providers.map((each) => each.id),
    };
  }

  private primaryOf(agent: Agent): ModelProvider | undefined {
    try {
      return providerFor(modelTargets(agent, agent.settings)[0]!, this.options.providers, this.options.provider, agent.name);
    } catch {
      return undefined;
    }
  }
}
