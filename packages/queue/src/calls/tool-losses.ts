import type { ToolLogger } from '@arcflow/core';
import type { Job } from 'bullmq';

/**
 * How long a delivery's handler must have run for the delivery's loss (its worker died under it) to
 * count against the call's loss budget (`max_stalled_count`). A worker killed for reasons of its
 * own (a deploy, a node lost, an OOM of a neighbour) mostly takes calls that had just started with
 * it; a call that kills its workers does so while it runs. See docs/decisions.
 */
export const LOSS_GRACE_MS = 1_000;

/** Losses within the grace a call may take on top of its budget: BullMQ's stall limit for every job is the budget plus these. */
export const QUICK_LOSSES = 5;

/** The job's progress field as this module keeps it: the attempts whose handler ran past the grace and has not ended. */
interface LossMarks {
  readonly past_grace: readonly number[];
}

function marksOf(job: Job): number[] {
  const progress = job.progress as Partial<LossMarks> | null | undefined;
  const marks = progress && typeof progress === 'object' ? progress.past_grace : undefined;
  return Array.isArray(marks) ? marks.filter((attempt): attempt is number => Number.isSafeInteger(attempt)) : [];
}

/** The deliveries before `attempt` that were lost after their handler had run past the grace: the losses that count. */
export function countedLosses(job: Job, attempt: number): number {
  return marksOf(job).filter((marked) => marked < attempt).length;
}

/**
 * Watches one delivery's handler: once it has run for {@link LOSS_GRACE_MS}, the attempt is marked
 * on the job (one write, only for handlers that run that long); `end` removes the mark when the
 * handler has ended, whatever its outcome. A mark left behind is a delivery lost past the grace.
 */
export function watchGrace(job: Job, attempt: number, logger: ToolLogger): { end(): Promise<void> } {
  let written: Promise<void> | undefined;
  const write = (marks: number[]) =>
    job.updateProgress({ past_grace: marks } satisfies LossMarks).catch((error: unknown) => logger.warn('marking a tool job past its grace failed', { job_id: job.id, error }));
  const timer = setTimeout(() => {
    written = write([...marksOf(job), attempt]);
  }, LOSS_GRACE_MS);
  return {
    async end() {
      clearTimeout(timer);
      if (!written) return;
      await written;
      await write(marksOf(job).filter((marked) => marked !== attempt));
    },
  };
}
