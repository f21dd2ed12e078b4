import { type ChatMessage, type ProviderResponse, type StepState, initialStepState } from '@arcflow/core';
import type { ThreadStore } from '../store/thread-store.ts';
import type { StepContext } from './round.ts';

/**
 * Before the write that completes a run on a thread (SPEC §11): stages the run's own messages —
 * those of its state after the instructions and the thread's earlier messages (its input, the
 * assistant turns with their tool calls, the tool results), then the final answer — for that write
 * to append to the thread. A run on no thread: nothing is written.
 */
export async function stageThreadMessages(threads: ThreadStore, context: StepContext, state: StepState, response: ProviderResponse): Promise<void> {
  const base = await threads.base(context.spec.run_id);
  if (base === undefined) return;
  const instructions = initialStepState(context.agent, [], context.data.step_id).messages.length;
  const answer: ChatMessage = { role: 'assistant', content: response.content };
  await threads.stage(context.spec.run_id, [...state.messages.slice(instructions + base), answer]);
}
