import { ErrorCode } from '../errors.ts';
import type { StepSettings } from '../definitions/settings.ts';
import { promptBytes } from '../loop/decide.ts';
import type { ProviderRequest, ProviderResponse } from '../provider.ts';
import { type RunSpent, microsOf, usdOf } from '../vocabulary/tokens.ts';
import { type ModelPrice, type Pricing, costMicros, priceOf, worstCaseMicros } from './pricing.ts';

/** A call's cost as it is about to be made (SPEC §14): its model's price (undefined: not priced) and its worst case, in micro-dollars. */
export interface CallCost {
  readonly model: string;
  readonly price: ModelPrice | undefined;
  readonly worst_micros: number;
}

/** The worst case of `request` under `pricing` (0 for a model with no price). */
export function callCost(pricing: Pricing | undefined, request: ProviderRequest): CallCost {
  const price = priceOf(pricing, request.model);
  return { model: request.model, price, worst_micros: price ? worstCaseMicros(price, promptBytes(request), request.settings?.max_tokens) : 0 };
}

/** The run's cost cap in micro-dollars, if its budget sets one. */
export function runCostCap(settings: StepSettings): number | undefined {
  const cap = settings.budget?.max_cost_usd;
  return cap === undefined ? undefined : microsOf(cap);
}

/** Dollars as a message shows them: up to 6 decimals, trailing zeros cut (`$0.0123`). */
export function dollars(micros: number): string {
  return `$${usdOf(micros)
    .toFixed(6)
    .replace(/\.?0+$/, '')}`;
}

/** Why a call to an unpriced model is refused under a cost budget. */
export function unpricedRefusal(model: string, budget: string): string {
  return `model '${model}' has no entry in the worker's pricing, so ${budget} cannot be checked; the call was not made`;
}

/**
 * Why the run's `max_cost_usd` refuses a call, if it does: the run's spend (its child runs'
 * included) and what is held for its calls in flight, plus this call's worst case, over the cap.
 */
export function runCostRefusal(settings: StepSettings, spent: RunSpent, call: CallCost, held = 0): string | undefined {
  const cap = runCostCap(settings);
  if (cap === undefined) return undefined;
  if (!call.price) return unpricedRefusal(call.model, "the run's max_cost_usd");
  const used = (spent.cost_micros ?? 0) + held;
  if (used + call.worst_micros <= cap) return undefined;
  return `the run's max_cost_usd is ${dollars(cap)}: it has spent ${dollars(used)} and the next call to '${call.model}' could cost up to ${dollars(call.worst_micros)}; the call was not made`;
}

/** The `StepExecutionFailed` error of a refused call. */
export function budgetRefusal(step_id: string, reason: string): { readonly error_code: string; readonly message: string } {
  return { error_code: ErrorCode.BudgetExceeded, message: `step '${step_id}' stopped: ${reason}` };
}

/** A response's cost in micro-dollars under `price` (undefined when not priced). */
export function responseCost(price: ModelPrice | undefined, response: Pick<ProviderResponse, 'usage'>): number | undefined {
  return price ? costMicros(price, response.usage) : undefined;
}

/** `TokensConsumed`'s cost fields for a call of `cost_micros` after the run had spent `before_micros`. */
export function costFields(cost_micros: number | undefined, before_micros: number): { cost_usd: number; cumulative_cost_usd: number } | undefined {
  return cost_micros === undefined ? undefined : { cost_usd: usdOf(cost_micros), cumulative_cost_usd: usdOf(before_micros + cost_micros) };
}
