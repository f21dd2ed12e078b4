import { type EventDraft, applyTracePolicy } from '@arcflow/core';

/** An event to append, with an optional dedupe id: an event with an id is written at most once. */
export interface PendingEvent {
  readonly event: EventDraft;
  readonly once?: string;
}

/** How the store turns events into what its scripts take. */
export interface EventCodec {
  /** Events as the scripts take them: `{dedupeId, json}` pairs. */
  pairs(events: readonly PendingEvent[]): [string, string][];
  /**
   * The event as stored: policy applied and time set, without `seq` (its place in the log) or
   * `run_id` (the log's run), which the event reader adds back. Every byte here is sent, parsed
   * and kept for each of a run's events.
   */
  eventJson(event: EventDraft, ts?: number): string;
}

function eventJson(event: EventDraft, ts = Date.now()): string {
  const stored: Record<string, unknown> = applyTracePolicy(event);
  stored.ts = ts;
  return JSON.stringify(stored);
}

export const EVENT_CODEC: EventCodec = Object.freeze({
  eventJson,
  pairs: (events: readonly PendingEvent[]): [string, string][] => events.map(({ event, once }) => [once ?? '', eventJson(event)]),
});
