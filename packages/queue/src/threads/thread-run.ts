import { type Agent, type EventDraft, type StepState, byteSize, initialStepState, stateAsChanges } from '@arcflow/core';
import { JobId, QueueName } from '../redis/keys.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { ThreadStore } from './thread-store.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { RunTrace } from '../tracing.ts';
import type { ProviderJobData } from '../jobs/jobs.ts';

/**
 * Adds the first job of the run a thread run's end made active (SPEC §11: a run waiting in its
 * thread's line holds no job; it starts when the run before it ends). Called by the process whose
 * write ended the run, by a later delivery of a job of the ended run (that process died first),
 * and safe to call again: the job id is the run's first. A job of that id that finished without
 * starting the run is replaced; one queued, delayed or running is left as it is.
 */
export async function startNextOnThread(threads: ThreadStore, queues: Dispatcher, run_id: string): Promise<void> {
  if (!(await threads.isThreadRun(run_id))) return;
  const next = await threads.next(run_id);
  if (!next) return;
  const queue = queues.forRun(next.job?.queue ?? QueueName.agent(next.agent), next.run_id);
  const existing = await queue.getJob(JobId.provider(next.run_id, 's1', 1));
  if (!next.job) {
    // A run enqueued by an earlier version (no `thread_job`) waits with a delayed job: it runs now.
    if (existing && (await existing.isDelayed())) await queues.promote(existing).catch(() => undefined);
    return;
  }
  // A delayed first job of this version's run is one a worker delayed (its provider's pause, a retry's
  // backoff): it stays so, and the add below, of the same id, adds nothing.
  if (existing && (await queues.finished(existing))) await queues.remove(existing).catch(() => undefined);
  // Loaded here: a client that only cancels never loads the OpenTelemetry API.
  const { firstJobCarrier } = await import('../tracing.ts');
  const data: ProviderJobData = { run_id: next.run_id, step_id: 's1', iteration: 1, trace: next.trace.traceparent ? firstJobCarrier(next.trace as RunTrace) : {} };
  await queues.startStep({ queue: next.job.queue, attempts: next.job.attempts }, data);
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
 * Before the write that completes a run on a thread (SPEC §11): stages where the run's
 * conversation is for that write to copy onto the thread — the ranges of its transcript list after
 * the instructions, without arcflow's notes (see {@link conversationRanges}), then the final answer
 * — and the run state it leaves, for that write to keep as the thread's. Nothing already in Redis
 * is sent again. A run on no thread: nothing is written.
 */
export async function stageThreadMessages(
  threads: ThreadStore,
  store: RunStore,
  run: { run_id: string; step_id: string; agent: Agent },
  state: StepState,
  answer: string | null,
): Promise<void> {
  const { run_id, step_id } = run;
  if ((await threads.base(run_id)) === undefined) return;
  const instructions = state.earlier?.at ?? initialStepState(run.agent, [], step_id).messages.length;
  // The run state it leaves (SPEC §17): the thread's next run starts from it.
  const runState = await store.stateLogs.read(run_id, step_id, state.state_entries ?? 0);
  await threads.stage(run_id, conversationRanges(state, instructions), { role: 'assistant', content: answer }, stateAsChanges(runState));
}

/**
 * The run's own conversation as ranges of its step's transcript list (which holds its messages
 * but the thread's it began on): from the first message after the instructions to the end, cut
 * around arcflow's notes; a flat list of from, to (excluded) pairs.
 */
export function conversationRanges(state: Pick<StepState, 'messages' | 'earlier' | 'notes'>, instructions: number): number[] {
  const earlier = state.earlier?.count ?? 0;
  const total = state.messages.length - earlier;
  // Notes come after the thread's messages, so in the list they sit `earlier` places lower.
  const cuts = (state.notes ?? []).map((index) => index - earlier).filter((at) => at >= instructions && at < total);
  const ranges: number[] = [];
  let from = instructions;
  for (const at of [...cuts, total]) {
    if (at > from) ranges.push(from, at);
    from = at + 1;
  }
  return ranges;
}
