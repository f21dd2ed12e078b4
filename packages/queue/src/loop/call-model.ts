import {
  type CallCost,
  costFields,
  responseCost,
  type ModelSettings,
  type ProviderResponse,
  type ResponseDecision,
  type StepState,
  type TryPosition,
  TOOL_TERMINAL_KINDS,
  asProviderFailure,
  executedCalls,
  markApprovals,
  normalizeResponse,
  decideResponse,
  decidedEvents,
  requestSentEvent,
  responseEvents,
  testResponse,
} from '@arcflow/core';
import { metricsEnabled, recordProviderCall, recordTimeToFirstChunk } from '@arcflow/telemetry/metrics';
import { Attr, SpanName } from '@arcflow/telemetry/semconv';
import type { Job } from 'bullmq';
import { SpanKind, failSpan, startChildSpan } from '../tracing.ts';
import { type RecordedResponse, planOf } from '../records/formats.ts';
import type { PendingEvent } from '../records/event-codec.ts';
import { runEnded } from '../runs/end-run.ts';
import { recordRunEnded } from '../metrics/run-ends.ts';
import type { ProviderJobData } from '../jobs/jobs.ts';
import { CallStream } from '../streams/call-stream.ts';
import type { StreamPart } from '../streams/stream-store.ts';
import { runStreams } from '../streams/run-streams.ts';
import { stageThreadMessages } from '../threads/thread-run.ts';
import { roundCall } from '../calls/tool-execution.ts';
import type { PreparedCall } from './model-router.ts';
import { pastPause, providerFailed } from './provider-failure.ts';
import { fansOut } from './round.ts';
import { endingFor, failStep } from './end-step.ts';
import { settleCall, settleRecorded } from './call-budget.ts';
import type { PendingState } from './ready-state.ts';
import type { ProviderJobDeps, StepContext } from './step-context.ts';

/** A response that stands for call `n` (its round was opened when it was recorded). */
export type Responded =
  /** Recorded now, with the decision taken on it; `ended` when the run ended in the same write. */
  | { readonly response: ProviderResponse; readonly decision: ResponseDecision; readonly ended: boolean }
  /** An earlier delivery's response (and plan) stands. */
  | { readonly recorded: RecordedResponse };

/**
 * The try of call `n` this delivery makes: the call's recorded position (moved only by failed
 * provider calls) says which of the step's models it goes to; a call whose provider is paused by
 * a 429 goes to a fallback elsewhere, or waits (throws DelayedError). Folding is deterministic, so
 * the request built from the ready state is the one any delivery would send.
 */
export async function prepareCall(
  deps: ProviderJobDeps,
  context: StepContext,
  ready: PendingState,
  position: TryPosition,
  job: Job<ProviderJobData>,
  token: string | undefined,
): Promise<ReturnType<ProviderJobDeps['models']['prepare']>> {
  const site = { ...context, test: context.test && 'responses' in context.test ? context.test : undefined, job };
  const call = deps.models.prepare(site, ready.state, position);
  const moved = 'error' in call ? undefined : await pastPause(deps, job, token, call);
  return moved ? deps.models.prepare(site, ready.state, moved) : call;
}

/** The call's `RequestSent`, one per delivery: a write sent again after a lost reply adds it once. */
export function requestSent(context: StepContext, call: PreparedCall, job: Job<ProviderJobData>): PendingEvent {
  const { step_id, iteration } = context.data;
  return { event: requestSentEvent(step_id, iteration, call.provider_id, call.request), once: `sent|${step_id}|${iteration}|${job.attemptsStarted}` };
}

/**
 * Call `n` to the model, its response recorded once (an earlier delivery's response wins) with
 * the decision taken on it: the calls it fans out are marked open, and a response that ends the
 * run ends it, in the same write. Undefined when the step has ended instead (the call failed, or
 * the run ended meanwhile).
 */
export async function callAndRecord(
  deps: ProviderJobDeps,
  context: StepContext,
  state: StepState,
  call: PreparedCall,
  job: Job<ProviderJobData>,
  token: string | undefined,
  cost: CallCost,
): Promise<Responded | undefined> {
  const { store, cancellation } = deps;
  const { run_id, step_id, iteration } = context.data;
  const { signal, release } = cancellation.signalFor(run_id);
  // Each delivery and retry is its own attempt on the run's stream (SPEC §12): a later one resets the iteration's text.
  const text = new CallStream(store.streams, { run_id, step_id, iteration, attempt: Math.max(1, job.attemptsStarted) });
  // The run's tenant names its tokens in metrics (SPEC §18); the fair clock has read it already for this run's jobs.
  const tenant = metricsEnabled() ? (await deps.queues.fair.ownerOf(run_id)).tenant : undefined;
  const answer = await callModel(call, { run_id, step_id, iteration, tenant }, signal, runStreams(context.spec, context.agent) ? text.onText : undefined).finally(release);
  if ('thrown' in answer) {
    await text.abandon();
    const failed = await providerFailed(deps, job, token, call, answer.thrown);
    // The call has failed for good (a retry would have thrown DelayedError): its hold is released.
    await settleCall(deps, context, cost, undefined);
    await failStep(deps, context, failed);
    return undefined;
  }
  const { response } = answer;
  // Priced at the model that answered (this try's: the agent's own or a fallback, SPEC §16).
  const cost_micros = responseCost(cost.price, response);
  const events = responseEvents(state, call.provider_id, call.request.model, response, answer.latency_ms, costFields(cost_micros, context.spent.cost_micros ?? 0));
  const part = await text.part(
    response.content ?? '',
    response.tool_calls.map((requested) => [requested.id, requested.function.name]),
  );
  // Decided before recording, so the round of calls it fans out is opened in the same write; decided
  // again when another step of the run recorded spend meanwhile and a budget could be crossed.
  let spent = context.spent;
  for (let tries = 1; ; tries += 1) {
    const decision = markApprovals(decideResponse(context.agent, state, context.settings, response, spent), { step_id, iteration }, run_id, deps.logger);
    const open = decision.type === 'tools' ? decision.calls.filter((planned) => fansOut(planned, context.settings)) : [];
    // A response that ends the run ends it in the same write.
    const ending = context.workflow ? undefined : endingFor(step_id, iteration, decision);
    if (ending?.outcome.status === 'completed') await stageThreadMessages(deps.threads, deps.store, { run_id, step_id, agent: context.agent }, state, response.content);
    const recorded = await store.recordResponse(
      run_id,
      step_id,
      iteration,
      {
        response,
        plan: planOf(decision, (planned) => fansOut(planned, context.settings)),
        spent,
        // Which of the step's models answered: the agent's own, or a fallback.
        target: { provider_id: call.provider_id, model: call.request.model },
      },
      // What the decision adds is written with it (a rejected answer's OutputValidationFailed, the calls it does not execute); a failure's events with the ending.
      [...events, ...decidedEvents(decision)].map((event) => ({ event })),
      open.map((planned) => roundCall(planned, { step_id, iteration }, true)),
      ending,
      executedCalls(decision),
      withClosed(part, decision),
      cost_micros,
      // Each try that finds the spend moved follows another step's write: a bound, should steps keep writing.
      tries <= MAX_BUDGET_TRIES && budgetChecked(context.settings, decision) ? spent : undefined,
    );
    if (recorded && 'stale' in recorded) {
      spent = { ...spent, ...recorded.stale };
      continue;
    }
    return afterRecorded(deps, context, cost, job, response, decision, ending, recorded);
  }
}

/** How many times a response is decided again against a run's spend that moved before it is recorded as last decided. */
const MAX_BUDGET_TRIES = 20;

/** Whether recording `decision` must check that the run's spend is still what it was decided against: calls to execute under a cap. */
function budgetChecked(settings: StepContext['settings'], decision: ResponseDecision): boolean {
  const budget = settings.budget;
  return budget !== undefined && (budget.max_total_tokens !== undefined || budget.max_tool_calls !== undefined) && executedCalls(decision) > 0;
}

/** What follows a response's write: its cost settled, the run's end told, or an earlier delivery's response acted on. */
async function afterRecorded(
  deps: ProviderJobDeps,
  context: StepContext,
  cost: CallCost,
  job: Job<ProviderJobData>,
  response: ProviderResponse,
  decision: ResponseDecision,
  ending: ReturnType<typeof endingFor>,
  recorded: Exclude<Awaited<ReturnType<ProviderJobDeps['store']['recordResponse']>>, { readonly stale: unknown }>,
): Promise<Responded | undefined> {
  const { store } = deps;
  const { run_id } = context.data;
  if (!recorded) {
    // The run ended meanwhile; the provider answered all the same, so its cost counts.
    await settleCall(deps, context, cost, response);
    return undefined;
  }
  // An earlier delivery's response stands: act on that one, as it was decided (its cost is the one settled).
  if (!recorded.recordedNow) {
    await settleRecorded(deps, context.data, recorded.recorded);
    return { recorded: recorded.recorded };
  }
  await settleCall(deps, context, cost, response);
  if (ending) {
    recordRunEnded(recorded.ended, ending);
    await runEnded(store, run_id, deps, recorded.ended);
    // The run's compaction removed its other finished jobs; this one, held now, goes when it completes.
    job.opts.removeOnComplete = true;
  }
  return { response, decision, ended: ending !== undefined };
}

/** A try's outcome: the response, normalised, with its latency; or what the provider threw. */
export type ModelAnswer = { readonly response: ProviderResponse; readonly latency_ms: number } | { readonly thrown: unknown };

/**
 * Makes one try of a call under its `chat` span (streamed when `onText` is given, which is told the text as the provider streams it): the GenAI request attributes (the model, and
 * the settings the conventions name, only when set), the provider that answered, the usage.
 */
export async function callModel(
  call: PreparedCall,
  place: { readonly run_id: string; readonly step_id: string; readonly iteration: number; readonly tenant?: string | undefined },
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
  // The stream's first chunk gives the call's time to first chunk (SPEC §18): the provider tells
  // it, or else its first text does.
  let streamed = false;
  const onFirstChunk = () => {
    if (streamed) return;
    streamed = true;
    recordTimeToFirstChunk({ provider: provider_id, model: request.model }, (performance.now() - started) / 1000);
  };
  const onFirstText = (delta: string) => {
    onFirstChunk();
    onText?.(delta);
  };
  try {
    // A run that does not stream gives no `onText`: its provider makes a plain call (SPEC §12).
    const response = normalizeResponse(
      test ? testResponse(test, place.iteration) : await call.provider!.complete(request, onText ? { signal, onText: onFirstText, onFirstChunk } : { signal }),
      place.iteration,
    );
    chat.setAttributes({
      [Attr.inputTokens]: response.usage.input,
      [Attr.outputTokens]: response.usage.output,
      [Attr.finishReasons]: [response.finish_reason],
      ...(response.model ? { [Attr.responseModel]: response.model } : {}),
    });
    recordProviderCall({ provider: provider_id, model: request.model }, (performance.now() - started) / 1000, response.usage, place.tenant);
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

/** The response's part of the stream, with a failed `tool_result` for each call the decision ends without executing (SPEC §12: the stream shows each call's end). */
function withClosed(part: StreamPart | undefined, decision: ResponseDecision): StreamPart | undefined {
  if (!part) return part;
  const ended = [...decidedEvents(decision), ...(decision.type === 'fail' ? decision.events : [])];
  const closed = ended.flatMap((event) => (TOOL_TERMINAL_KINDS.has(event.kind) && 'tool_call_id' in event ? [event.tool_call_id] : []));
  return closed.length > 0 ? { ...part, closed } : part;
}
