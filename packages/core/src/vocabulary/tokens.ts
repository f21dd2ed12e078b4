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
}

export const NOTHING_SPENT: RunSpent = Object.freeze({ tokens: 0, tool_calls: 0 });
