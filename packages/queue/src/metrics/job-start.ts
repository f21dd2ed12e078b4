import { metricsEnabled, recordJobStart } from '@arcflow/telemetry/metrics';

/** What a job's start is measured from (BullMQ's own fields). */
interface TakenJob {
  readonly timestamp: number;
  readonly delay: number;
  readonly processedOn?: number | undefined;
  readonly attemptsStarted: number;
}

/**
 * Records `arcflow.job.schedule_to_start` for a job a worker just took: from when it could run
 * (added, plus its delay) to when it became active. Its first delivery only: BullMQ keeps a
 * job's first timestamp across retries and re-deliveries, so a later delivery's wait is not known.
 * Returns the job, so a processor can record and go on in one expression.
 */
export function recordJobTaken<Taken extends TakenJob>(queue: string, kind: 'provider' | 'tool', job: Taken): Taken {
  if (!metricsEnabled() || job.attemptsStarted > 1) return job;
  const startedAt = job.processedOn ?? Date.now();
  recordJobStart(queue, kind, Math.max(0, startedAt - (job.timestamp + (job.delay ?? 0))) / 1000);
  return job;
}
