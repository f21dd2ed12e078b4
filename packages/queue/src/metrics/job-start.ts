import { metricsEnabled, recordJobStart } from '@arcflow/telemetry/metrics';

/** What a job's start is measured from (BullMQ's own fields), and the run it is of. */
interface TakenJob {
  readonly timestamp: number;
  readonly delay: number;
  readonly processedOn?: number | undefined;
  readonly attemptsStarted: number;
  readonly data: { readonly run_id: string };
}

/** A run's tenant (the fair clock's, which reads it once per run and remembers it). */
export type TenantOf = (run_id: string) => Promise<{ readonly tenant: string }>;

/**
 * Records `arcflow.job.schedule_to_start` for a job a worker just took: from when it could run
 * (added, plus its delay) to when it became active, by its run's tenant. Its first delivery only:
 * BullMQ keeps a job's first timestamp across retries and re-deliveries, so a later delivery's
 * wait is not known. The wait is taken now and recorded once the tenant is known (the job goes
 * on meanwhile; a failed read records nothing). Returns the job, so a processor can record and
 * go on in one expression.
 */
export function recordJobTaken<Taken extends TakenJob>(queue: string, kind: 'provider' | 'tool', job: Taken, tenantOf: TenantOf): Taken {
  if (!metricsEnabled() || job.attemptsStarted > 1) return job;
  const startedAt = job.processedOn ?? Date.now();
  const seconds = Math.max(0, startedAt - (job.timestamp + (job.delay ?? 0))) / 1000;
  tenantOf(job.data.run_id).then(
    (owner) => recordJobStart(queue, kind, seconds, owner.tenant),
    () => undefined,
  );
  return job;
}
