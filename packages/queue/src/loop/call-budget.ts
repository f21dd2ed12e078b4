import { type CallCost, type ProviderResponse, type RunError, budgetRefusal, costMicros, priceOf, stepRunError } from '@arcflow/core';
import type { RecordedResponse } from '../records/formats.ts';
import type { CallPlace } from '../cost/cost-ledger.ts';
import type { PreparedCall } from './model-router.ts';
import type { ProviderJobDeps, StepContext } from './step-context.ts';

/**
 * Holds call `n`'s worst case against the run's and its tenant's budgets before it is made (SPEC
 * §14). A call that does not fit is not made: the step's error (`budget_exceeded`) then.
 */
export async function reserveCall(deps: ProviderJobDeps, context: StepContext, call: PreparedCall): Promise<CallCost | { readonly error: RunError }> {
  const reserved = await deps.queues.cost.reserve(context.data, deps.options.pricing, context.settings, context.spent, call.request);
  if ('cost' in reserved) return reserved.cost;
  const { run_id, step_id, iteration } = context.data;
  deps.logger.warn('provider call refused by a cost budget', { run_id, step_id, iteration, reason: reserved.refused });
  const { error_code, message } = budgetRefusal(step_id, reserved.refused);
  return { error: stepRunError(error_code, message) };
}

/** Replaces the call's hold by what its answer cost (0: it was never answered). Nothing to do for a model that is not priced. */
export async function settleCall(deps: ProviderJobDeps, context: StepContext, cost: CallCost, response: ProviderResponse | undefined): Promise<void> {
  if (!cost.price) return;
  await deps.queues.cost.settle(context.data, response ? costMicros(cost.price, response.usage) : 0);
}

/**
 * Settles the hold of a call whose answer an earlier delivery recorded (its worker may have died
 * before settling), at the price of the model that answered it. Settling twice changes nothing.
 */
export async function settleRecorded(deps: ProviderJobDeps, place: CallPlace, recorded: RecordedResponse): Promise<void> {
  const price = recorded.target ? priceOf(deps.options.pricing, recorded.target.model) : undefined;
  if (!price) return;
  await deps.queues.cost.settle(place, costMicros(price, recorded.response.usage));
}
