import { metricsEnabled, recordRunEnd, recordStep } from '@arcflow/telemetry/metrics';
import type { EndedRunFacts, RunEnding } from '../runs/ending.ts';

/**
 * Records a run that this process ended (its write did the transition, so each run is counted
 * once, however often its jobs are delivered): `arcflow.runs` and `arcflow.run.duration` from
 * enqueue to now (by the run's tenant, bounded to the names the worker's options give), and for an agent run, which is its one step, `gen_ai.invoke_agent.duration`
 * over the same time (the run's root span is that step's span too). `facts` come back from the
 * script that ended the run, so this reads nothing; with metrics off it records nothing.
 */
export function recordRunEnded(facts: EndedRunFacts | undefined, ending: RunEnding): void {
  if (!facts || !metricsEnabled()) return;
  const seconds = Math.max(0, Date.now() - facts.created_at) / 1000;
  const { outcome } = ending;
  recordRunEnd({ agent: facts.agent, workflow: facts.workflow, status: outcome.status, tenant: facts.tenant }, seconds);
  if (facts.workflow === undefined) recordStep(facts.agent, seconds, outcome.status === 'failed' ? outcome.error.error_code : undefined);
}
