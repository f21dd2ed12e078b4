import { RequestError, shortHash } from '@arcflow/core';
import type { EnqueueRequest } from './enqueue-request.ts';

/**
 * The hash of what an idempotency key stands for (SPEC §5): the agent, input, config, exec_config,
 * thread and initial state. Stored with a run enqueued with a key; a repeat of the key must match it.
 */
export function idempotentRequestHash(request: EnqueueRequest): string {
  return shortHash({
    agent: request.agent,
    input: request.input,
    config: orNull(request.config),
    exec_config: orNull(request.exec_config),
    thread_id: request.thread_id ?? null,
    // An empty state is not none: on a thread, none takes the state the thread's last run left.
    state: request.state ?? null,
  });
}

/** A config or exec_config left out and an empty one ask for the same: both hash as none. */
function orNull(value: unknown): unknown {
  if (value === undefined || value === null) return null;
  return typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0 ? null : value;
}

/**
 * Refuses a repeat of an idempotency key whose request differs from the first one's, as Stripe does:
 * `idempotency_conflict` (HTTP 409), and nothing is queued. A run stored without a hash is taken as it is.
 */
export function checkIdempotentRepeat(key: string, run_id: string, stored: string | undefined, request: EnqueueRequest): void {
  if (stored === undefined || stored === idempotentRequestHash(request)) return;
  throw new RequestError(
    'idempotency_conflict',
    `idempotency_key '${key}' was used for another request (run '${run_id}'): a repeat must have the same agent, input, config, exec_config, thread_id and state; use a new key for a new request`,
  );
}
