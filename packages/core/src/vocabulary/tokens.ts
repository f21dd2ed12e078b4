/**
 * What a run spends, in the words every floor of arcflow shares: this file imports nothing of arcflow.
 */

/** Token counts of one provider call or a running total. */
export interface Tokens {
  readonly input: number;
  readonly output: number;
  readonly total: number;
}

export const ZERO_TOKENS: Tokens = Object.freeze({ input: 0, output: 0, total: 0 });

export function addTokens(a: Tokens, b: Tokens): Tokens {
  return { input: a.input + b.input, output: a.output + b.output, total: a.total + b.total };
}

/** What the run had spent before a response: its tokens and its executed tool calls, over every step. */
export interface RunSpent {
  readonly tokens: number;
  readonly tool_calls: number;
  /** Its cost in whole micro-dollars (SPEC §14; absent: none counted). */
  readonly cost_micros?: number;
}

export const NOTHING_SPENT: RunSpent = Object.freeze({ tokens: 0, tool_calls: 0 });

/** Micro-dollars as dollars (a whole count of micro-dollars, so no drift accumulates). */
export function usdOf(micros: number): number {
  return micros / 1_000_000;
}

/** Dollars as whole micro-dollars, rounded down (a cap in micro-dollars never exceeds the one given). */
export function microsOf(usd: number): number {
  return Math.floor(usd * 1_000_000 + 1e-6);
}
