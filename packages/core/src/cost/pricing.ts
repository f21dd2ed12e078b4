import { ConfigError } from '../errors.ts';
import { isPlainObject } from '../plain-object.ts';
import type { Tokens } from '../vocabulary/tokens.ts';

/**
 * What a model's tokens cost (SPEC §14), in USD per million tokens. Costs are counted in whole
 * micro-dollars: a price in USD per million tokens is micro-dollars per token, so a call's cost is
 * `input × input_per_mtok + output × output_per_mtok` micro-dollars, rounded up once per call.
 */
export interface ModelPrice {
  readonly input_per_mtok: number;
  readonly output_per_mtok: number;
  /** The output tokens a call's worst case counts when the request sets no `max_tokens` (default 16,384). */
  readonly max_output_tokens?: number;
}

/** `pricing`: each model's price, by the model id a request names. */
export type Pricing = Readonly<Record<string, ModelPrice>>;

/** The output tokens a worst case counts when neither `max_tokens` nor the price's `max_output_tokens` is set. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 16_384;

const PRICE_KEYS = ['input_per_mtok', 'output_per_mtok', 'max_output_tokens'] as const;

/** The largest price taken (USD per million tokens): far above any model's, and small enough that a call's cost stays an exact integer. */
const MAX_PRICE_PER_MTOK = 1_000_000;

/** `pricing` checked at start: an unknown key or a bad value is refused, naming it (`pricing.gpt-4o.input_per_mtok: …`). */
export function checkPricing(pricing: unknown): Pricing {
  if (!isPlainObject(pricing)) throw new ConfigError('pricing must be an object keyed by model');
  for (const [model, price] of Object.entries(pricing)) {
    const where = `pricing.${model.slice(0, 140)}`;
    if (model === '') throw new ConfigError('pricing: a model name must not be empty');
    if (!isPlainObject(price)) throw new ConfigError(`${where} must be an object { input_per_mtok, output_per_mtok, max_output_tokens? }`);
    for (const [key, value] of Object.entries(price)) {
      if (!(PRICE_KEYS as readonly string[]).includes(key)) throw new ConfigError(`${where}: unknown key '${key.slice(0, 60)}' (keys: ${PRICE_KEYS.join(', ')})`);
      const shown = JSON.stringify(value)?.slice(0, 40);
      if (key === 'max_output_tokens') {
        if (!Number.isSafeInteger(value) || (value as number) < 1) throw new ConfigError(`${where}.${key}: expected a whole number of at least 1, got ${shown}`);
      } else if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_PRICE_PER_MTOK) {
        throw new ConfigError(`${where}.${key}: expected a number from 0 to ${MAX_PRICE_PER_MTOK} (USD per million tokens), got ${shown}`);
      }
    }
    for (const key of ['input_per_mtok', 'output_per_mtok'] as const) {
      if (!(key in price)) throw new ConfigError(`${where}.${key}: required (USD per million tokens)`);
    }
  }
  return Object.freeze({ ...(pricing as Record<string, ModelPrice>) });
}

/** The price of `model`, if it has one. */
export function priceOf(pricing: Pricing | undefined, model: string): ModelPrice | undefined {
  return pricing !== undefined && Object.hasOwn(pricing, model) ? pricing[model] : undefined;
}

/** A call's cost in whole micro-dollars, rounded up (so counted spend is never below the true cost). */
export function costMicros(price: ModelPrice, usage: Pick<Tokens, 'input' | 'output'>): number {
  return Math.ceil(usage.input * price.input_per_mtok + usage.output * price.output_per_mtok - 1e-9);
}

/**
 * A call's worst case in micro-dollars (SPEC §14): the prompt's size in bytes as its input
 * tokens (no tokenizer counts more tokens than bytes), and `max_tokens`, else the price's
 * `max_output_tokens`, else 16,384, as its output tokens.
 */
export function worstCaseMicros(price: ModelPrice, prompt_bytes: number, max_tokens: number | undefined): number {
  const output = max_tokens ?? price.max_output_tokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
  return costMicros(price, { input: prompt_bytes, output });
}
