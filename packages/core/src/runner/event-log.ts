import { applyTracePolicy } from '../events/policy.ts';
import type { EventDraft, TraceEvent } from '../events/types.ts';

/** An in-memory event log: gives each event its run id, the next `seq` and a timestamp. */
export class LocalEventLog {
  readonly events: TraceEvent[] = [];
  constructor(
    readonly run_id: string,
    private readonly onEvent?: (event: TraceEvent) => void,
  ) {}

  append(...drafts: EventDraft[]): void {
    for (const draft of drafts) {
      // The policy returns a fresh object: completed in place, cheaper than a spread with more fields.
      const event = Object.assign(applyTracePolicy(draft), { run_id: this.run_id, seq: this.events.length + 1, ts: Date.now() }) as TraceEvent;
      this.events.push(event);
      this.onEvent?.(event);
    }
  }
}
