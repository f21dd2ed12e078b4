import type { Agent } from '@arcflow/core';
import type { RunSpec } from '../records/run-spec.ts';

/**
 * Whether a run's provider calls stream the model's text as it is written (SPEC §12): as the run
 * was asked at enqueue (a child run: as its parent streams), else as its agent (a workflow
 * step's agent) is defined. A run that does not stream makes plain calls; its stream still gets
 * each iteration's text, whole, from the script that records the response.
 */
export function runStreams(spec: Pick<RunSpec, 'stream'>, agent: Pick<Agent, 'stream'>): boolean {
  return spec.stream ?? agent.stream;
}
