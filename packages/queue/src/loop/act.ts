import { NOTHING_SPENT, type PlannedCall, type ResponseDecision, type StepState, decideResponse, lostCall } from '@arcflow/core';
import { type RecordedResponse, planOf, samePlan, withRecordedApprovals } from '../records/formats.ts';
import { roundCall } from '../calls/tool-execution.ts';
import { enqueueNext, fansOut, runRound } from './round.ts';
import { endStep, endingFor } from './end-step.ts';
import type { Responded } from './call-model.ts';
import type { ProviderJobDeps, StepContext } from './step-context.ts';

/**
 * Acts on response `n`: as decided now, or as its plan was recorded by an earlier delivery.
 * `step-done` when the response ended the run in the same write that recorded it.
 */
export async function act(deps: ProviderJobDeps, context: StepContext, state: StepState, responded: Responded): Promise<'ok' | 'step-done'> {
  if ('recorded' in responded) await actOnRecorded(deps, context, state, responded.recorded);
  else if (responded.ended) return 'step-done';
  else await actOn(deps, context, responded.decision);
  return 'ok';
}

/**
 * Response `n` of a round a fork copied from its source run (SPEC §15): its calls' results are
 * recorded already, so nothing is executed, waited for or fanned out; the next call folds them in.
 */
export async function replayCopied(deps: ProviderJobDeps, context: StepContext): Promise<'replayed'> {
  await enqueueNext(deps, context, []);
  return 'replayed';
}

/** Acts on the decision for response `n`: finish or fail the step, ask the model again, or run the round of calls. */
async function actOn(deps: ProviderJobDeps, context: StepContext, decision: ResponseDecision): Promise<void> {
  const { step_id, iteration } = context.data;
  switch (decision.type) {
    case 'complete':
    case 'fail': {
      await endStep(deps, context, endingFor(step_id, iteration, decision)!);
      return;
    }
    case 'final_answer':
    case 'repair_output':
      await enqueueNext(deps, context, []);
      return;
    case 'tools':
      await runRound(deps, context, decision.calls);
  }
}

/**
 * Acts again on a recorded response, as its plan says. This worker decides too; where its
 * decision differs from the plan (its agent changed since), the plan wins: a call decided
 * otherwise before is closed with a failure result (counted down if it was fanned out), so the
 * round's open count stays true and the round still joins.
 */
async function actOnRecorded(deps: ProviderJobDeps, context: StepContext, state: StepState, recorded: RecordedResponse): Promise<void> {
  const { agent, settings } = context;
  const decision = withRecordedApprovals(decideResponse(agent, state, settings, recorded.response, recorded.spent ?? NOTHING_SPENT), recorded.plan);
  const fanned = (planned: PlannedCall) => fansOut(planned, settings);
  const { plan } = recorded;
  if (samePlan(planOf(decision, fanned), plan)) return actOn(deps, context, decision);
  const { run_id, step_id, iteration } = context.data;
  deps.logger.warn('this worker decides a recorded response differently (its agent changed); following the recorded plan', { run_id, step_id, iteration });
  if (plan.type === 'final_answer' || plan.type === 'repair_output') return enqueueNext(deps, context, []);
  // A response that completed or failed the step ended the run in the same write.
  if (plan.type !== 'tools') return;
  const mine = new Map(decision.type === 'tools' ? decision.calls.map((planned) => [planned.index, planned]) : []);
  const kept: PlannedCall[] = [];
  for (const entry of plan.calls) {
    const planned = mine.get(entry.index);
    if (planned && planned.action === entry.action && fanned(planned) === entry.fanned_out) {
      kept.push(planned);
      continue;
    }
    // A repeat is answered from earlier results when the round is folded.
    if (entry.action === 'repeat') continue;
    const decidedBefore = { call: recorded.response.tool_calls[entry.index]! } as PlannedCall;
    const place = { step_id, iteration };
    await deps.store.recordToolResult(run_id, roundCall(decidedBefore, place, entry.fanned_out), lostCall(decidedBefore, place));
  }
  await runRound(deps, context, kept);
}
