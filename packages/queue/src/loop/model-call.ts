import {
  type Agent,
  ConfigError,
  type ModelProvider,
  type ModelSettings,
  type ProviderRequest,
  type ProviderResponse,
  type RunError,
  type StepSettings,
  type StepState,
  TEST_PROVIDER_ID,
  type TestTurn,
  type Workflow,
  asProviderFailure,
  buildRequest,
  modelTargets,
  normalizeResponse,
  providerFor,
  requestFor,
  stepRunError,
  type TryPosition,
  testResponse,
} from '@arcflow/core';
import { recordProviderCall, recordTimeToFirstChunk } from '@arcflow/telemetry/metrics';
import { Attr, SpanName } from '@arcflow/telemetry/semconv';
import { SpanKind, failSpan, startChildSpan } from '../tracing.ts';
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
 * Where a worker's model calls go (SPEC §16): each agent's provider (a named one, else the
 * worker's default) and each of its fallbacks in turn. Built once when the worker starts, which
 * is when an agent naming a provider the worker lacks is refused.
 */
export class ModelRouter {
  constructor(
    private readonly options: {
      readonly provider: ModelProvider | undefined;
      readonly providers: Readonly<Record<string, ModelProvider>>;
      readonly default_model: string | undefined;
    },
    served: { readonly agents: ReadonlyMap<string, Agent>; readonly workflows: ReadonlyMap<string, Workflow> },
  ) {
    for (const agent of served.agents.values()) {
      // Throws the one-line ConfigError for a provider this worker lacks, the agent's own or a fallback's.
      for (const target of modelTargets(agent, agent.settings)) providerFor(target, options.providers, options.provider, agent.name);
    }
  }

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

/** A try's outcome: the response, normalised, with its latency; or what the provider threw. */
export type ModelAnswer = { readonly response: ProviderResponse; readonly latency_ms: number } | { readonly thrown: unknown };

/**
 * Makes one try of a call under its `chat` span (streamed when `onText` is given, which is told the text as the provider streams it): the GenAI request attributes (the model, and
 * the settings the conventions name, only when set), the provider that answered, the usage.
 */
export async function callModel(
  call: PreparedCall,
  place: { readonly run_id: string; readonly step_id: string; readonly iteration: number },
  signal: AbortSignal,
  onText?: (delta: string) => void,
): Promise<ModelAnswer> {
  const { provider_id, request, test } = call;
  const started = performance.now();
  const chat = startChildSpan(SpanKind.CLIENT, () => ({
    name: SpanName.chat(request.model),
    attributes: {
      [Attr.operationName]: 'chat',
      [Attr.providerName]: provider_id,
      [Attr.requestModel]: request.model,
      ...requestAttributes(request.settings),
      [Attr.runId]: place.run_id,
      [Attr.stepId]: place.step_id,
      [Attr.iteration]: place.iteration,
    },
  }));
  // The first text the model streams gives the call's time to first chunk (SPEC §18).
  let streamed = false;
  const onFirstText = (delta: string) => {
    if (!streamed) {
      streamed = true;
      recordTimeToFirstChunk({ provider: provider_id, model: request.model }, (performance.now() - started) / 1000);
    }
    onText?.(delta);
  };
  try {
    // A run that does not stream gives no `onText`: its provider makes a plain call (SPEC §12).
    const response = normalizeResponse(
      test ? testResponse(test, place.iteration) : await call.provider!.complete(request, onText ? { signal, onText: onFirstText } : { signal }),
      place.iteration,
    );
    chat.setAttributes({
      [Attr.inputTokens]: response.usage.input,
      [Attr.outputTokens]: response.usage.output,
      [Attr.finishReasons]: [response.finish_reason],
      ...(response.model ? { [Attr.responseModel]: response.model } : {}),
    });
    recordProviderCall({ provider: provider_id, model: request.model }, (performance.now() - started) / 1000, response.usage);
    return { response, latency_ms: Math.round(performance.now() - started) };
  } catch (thrown) {
    failSpan(chat, asProviderFailure(thrown).error_code);
    recordProviderCall({ provider: provider_id, model: request.model, error_type: asProviderFailure(thrown).error_code }, (performance.now() - started) / 1000);
    return { thrown };
  } finally {
    chat.end();
  }
}

/** The settings a `chat` span may carry (SPEC §16): temperature, max_tokens, top_p and seed, each only when set. */
function requestAttributes(settings: ModelSettings | undefined): Record<string, number> {
  if (!settings) return {};
  const attributes: Record<string, number> = {};
  if (settings.temperature !== undefined) attributes[Attr.requestTemperature] = settings.temperature;
  if (settings.max_tokens !== undefined) attributes[Attr.requestMaxTokens] = settings.max_tokens;
  if (settings.top_p !== undefined) attributes[Attr.requestTopP] = settings.top_p;
  if (settings.seed !== undefined) attributes[Attr.requestSeed] = settings.seed;
  return attributes;
}
