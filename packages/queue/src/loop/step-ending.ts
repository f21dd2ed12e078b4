import { type ResponseDecision, agentRespondedEvent, stepFailedEvent, stepRunError } from '@arcflow/core';
import { OutputType } from '../records/output-format.ts';
import type { RunEnding } from '../runs/ending.ts';

/**
 * How a decision ends the step, if it does: the outcome and the step's last events. A completed
 * step's output under an output schema is stored as JSON (`output_type`), so its record reads back
 * with `output_json` (SPEC §11).
 */
export function endingFor(step_id: string, iteration: number, decision: ResponseDecision): RunEnding | undefined {
  switch (decision.type) {
    case 'complete':
      return {
        outcome: { status: 'completed', output: decision.output, ...('output_json' in decision ? { output_type: OutputType.json } : {}) },
        step_id,
        events: [{ event: agentRespondedEvent(step_id, decision.output, iteration), once: `responded|${step_id}` }],
      };
    case 'fail': {
      const error = stepRunError(decision.error_code, decision.message);
      return { outcome: { status: 'failed', error }, step_id, events: [...decision.events.map((event) => ({ event })), { event: stepFailedEvent(step_id, error) }] };
    }
    default:
      return undefined;
  }
}
