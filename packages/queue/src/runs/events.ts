import type { TraceEvent } from '@arcflow/core';
import { readArchive } from '../records/archive.ts';
import { StoredFormatError } from '../records/formats.ts';
import type { PendingEvent } from '../records/event-codec.ts';
import { RUN_KEY_SUFFIX } from '../redis/keys.ts';
import type { StoreContext } from '../store-context.ts';

/** A run's event log: a list that only grows, an event's `seq` its place in it. */
export class RunEvents {
  constructor(private readonly context: StoreContext) {}

  /** Appends events unless the run has ended. */
  async append(run_id: string, events: readonly PendingEvent[]): Promise<boolean> {
    const { keys, scripts, codec } = this.context;
    const result = await scripts.appendEvents([keys.record(run_id)], { events: codec.pairs(events) });
    return result === 1;
  }

  /**
   * Events from index `from` (0-based) on. An event's `ts` is never earlier than the one before it
   * (`after`: the `ts` of event `from`, which a reader that goes on from there has read): events
   * are stamped where they are made, by processes whose writes may land in another order, or on
   * machines whose clocks differ by a little.
   */
  async events(run_id: string, from = 0, after = 0): Promise<TraceEvent[]> {
    const { redis, keys } = this.context;
    let lines = await redis.lrange(keys.run(run_id).events, from, -1);
    // A run's log holds its RunEnqueued at least: none is a compacted run, or a run that is gone.
    if (lines.length === 0) lines = ((await readArchive(redis, keys, run_id))?.list(RUN_KEY_SUFFIX.events) ?? []).slice(from);
    // An event's seq is its place in the log, which only grows; its run is the log's.
    let floor = after;
    return lines.map((line, index) => {
      const event = storedEvent(line, run_id, from + index + 1);
      if (typeof event.ts !== 'number' || event.ts < floor) return { ...event, ts: floor };
      floor = event.ts;
      return event;
    });
  }
}

/** Event `seq` of the run from its stored line; a line that is not an event (another process's write) is unreadable, named. */
function storedEvent(line: string, run_id: string, seq: number): TraceEvent {
  let stored: unknown;
  try {
    stored = JSON.parse(line);
  } catch {
    throw new StoredFormatError(`event ${seq} of run ${run_id}`, 'malformed');
  }
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored) || typeof (stored as { kind?: unknown }).kind !== 'string') {
    throw new StoredFormatError(`event ${seq} of run ${run_id}`, 'malformed');
  }
  const { kind, run_id: _stored, ...fields } = stored as Record<string, unknown>;
  return { seq, kind, run_id, ...fields } as unknown as TraceEvent;
}
