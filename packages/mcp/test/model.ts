import type { FakeRequest, FakeTurn } from '@arcflow/testing';

/** One call the fake model makes: the tool's name and its arguments. */
export type PlannedCall = readonly [name: string, args: unknown];

/** A run's input for {@link plannedModel}: the calls of each turn, then an answer. */
export const plan = (...turns: PlannedCall[][]): string => JSON.stringify(turns);

/**
 * A fake model that reads its plan from the run's input (see {@link plan}): turn N makes the
 * calls of the plan's entry N, and after the last the answer is the JSON list of every tool
 * result it was given, in order. Stateless, so any number of runs and workers can share it.
 */
export function plannedModel(request: FakeRequest): FakeTurn {
  const messages = request.body.messages as { role: string; content: string }[];
  const turns = JSON.parse(messages.find((message) => message.role === 'user')?.content ?? '[]') as PlannedCall[][];
  const turn = messages.filter((message) => message.role === 'assistant').length;
  const calls = turns[turn];
  if (calls) return { type: 'tools', calls: calls.map(([name, args], index) => ({ name, arguments: args, id: `t${turn}_${index}` })) };
  return { type: 'text', content: JSON.stringify(messages.filter((message) => message.role === 'tool').map((message) => message.content)) };
}
