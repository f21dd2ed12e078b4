import { toolDefinitionHash } from '@arcflow/core';
import { Worker } from 'bullmq';
import { QueueName } from '../redis/keys.ts';
import { recordJobTaken } from '../metrics/job-start.ts';
import type { ToolJobData } from '../jobs/jobs.ts';
import { inRunTrace } from '../tracing.ts';
import type { ResolvedWorkerOptions } from '../config/options.ts';
import { type ToolJobDeps, toolJobProcessor } from '../calls/tool-job.ts';
import { settleIfFinal } from './failed-jobs.ts';
import type { Serving } from './partition-serving.ts';

/**
 * Serves one queue per tool definition. Tool `concurrency` becomes the tool queue's global
 * concurrency, so it caps executions across every worker: a capped tool has one queue, under the
 * prefix's tag, so its cap holds across partitions.
 */
export async function serveToolQueues(serving: Serving, deps: ToolJobDeps, options: ResolvedWorkerOptions, prefixTag: string): Promise<void> {
  const process = toolJobProcessor(deps);
  const tenantOf = (run_id: string) => deps.queues.fair.ownerOf(run_id);
  // Each tool queue's cap is written at once (one round trip for all of them, not one per tool).
  const caps: Promise<unknown>[] = [];
  for (const tool of deps.tools.values()) {
    // An external tool's calls never run on a worker (SPEC §20): it has no queue to serve.
    if (tool.external) continue;
    const queueName = QueueName.tool(tool.name, toolDefinitionHash(tool));
    const queue = deps.queues.get(queueName);
    caps.push(tool.concurrency !== undefined ? queue.setGlobalConcurrency(tool.concurrency) : queue.removeGlobalConcurrency());
    serving.partitions.serve((tag) => {
      const capped = tool.concurrency !== undefined;
      if (capped && tag !== prefixTag) return;
      const budget = Math.min(options.tools_concurrency, tool.concurrency ?? Number.POSITIVE_INFINITY);
      const worker = new Worker<ToolJobData>(queueName, (job) => inRunTrace(job.data?.trace, () => process(recordJobTaken(queueName, 'tool', job, tenantOf))), {
        ...serving.common,
        prefix: tag,
        concurrency: capped ? budget : serving.partitions.share(budget),
      });
      if (!capped) serving.partitions.shareOf(worker, budget);
      worker.on('failed', (job, error) => settleIfFinal(deps, job, error?.message));
      worker.on('error', serving.logWorkerError('tool worker error', { tool: tool.name }));
      serving.partitions.add(worker);
    });
  }
  await Promise.all(caps);
}
