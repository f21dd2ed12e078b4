import { type ChatMessage, stateAsChanges, type EventDraft, type ProviderResponse, type StepState, byteSize, initialStepState } from '@arcflow/core';
import { JobId, QueueName } from '../keys.ts';
import type { RunStore } from '../store/run-store.ts';
import type { ThreadStore } from '../store/thread-store.ts';
import type { QueuePool } from './join.ts';
import type { StepContext } from './round.ts';

/**
 * How long a thread run's first job waits before it looks again whether its turn has come. The
 * process that ends the thread's active run promotes the next run's job at once; this delay only
 * matters when that process died in between.
 */
export const THREAD_WAIT_MS = 5_000;

/** Starts the first job of the run a thread run's end made active, now rather than when its delay is up. */
export async function startNextOnThread(threads: ThreadStore, queues: QueuePool, run_id: string): Promise<void> {
  if (!(await threads.isThreadRun(run_id))) return;
  const next = await threads.next(run_id);
  if (!next) return;
  const job = await queues.forRun(QueueName.agent(next.agent), next.run_id).getJob(JobId.provider(next.run_id, 's1', 1));
  // A job already promoted (or running) is left as it is.
  if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
}

/**
 * The messages steered into a thread run (SPEC §11, `on_busy: steer`) enter its state before call
 * `iteration`, with their `MessagesInjected`; the same for every delivery of the call.
 */
export async function injectSteered(threads: ThreadStore, run_id: string, state: StepState, iteration: number): Promise<{ state: StepState; event?: EventDraft }> {
  if (!(await threads.isThreadRun(run_id))) return { state };
  const messages = await threads.take(run_id, state.step_id, iteration);
  if (messages.length === 0) return { state };
  const event: EventDraft = { kind: 'MessagesInjected', step_id: state.step_id, iteration, count: messages.length, input_size_bytes: byteSize(JSON.stringify(messages)) };
  return { state: { ...state, messages: [...state.messages, ...messages] }, event };
}

/**
 * Before the write that completes a run on a thread (SPEC §11): stages the run's own messages —
 * those of its state after the instructions and the thread's earlier messages (its input, the
 * assistant turns with their tool calls, the tool results), then the final answer — for that write
 * to append to the thread, and the run state it leaves, for that write to keep as the thread's.
 * A run on no thread: nothing is written.
 */
export async function stageThreadMessages(threads: ThreadStore, store: RunStore, context: StepContext, state: StepState, response: ProviderResponse): Promise<void> {
  const { run_id, step_id } = context.data;
  const base = await threads.base(run_id);
  if (base === undefined) return;
  const instructions = initialStepState(context.agent, [], step_id).messages.length;
  const answer: ChatMessage = { role: 'assistant', content: response.content };
  // The run state it leaves (SPEC §17): the thread's next run starts from it.
  const runState = await store.stateLogs.read(run_id, step_id, state.state_entries ?? 0);
  await threads.stage(run_id, [...state.messages.slice(instructions + base), answer], stateAsChanges(runState));
}
