import { RequestError, clipped, nearestKey } from '@arcflow/core';
import type { EnqueueRequest } from './enqueue-request.ts';

/** Every option an enqueue takes (the client's, the HTTP body's, and what the CLI's flags build). */
const ENQUEUE_OPTIONS = {
  agent: true,
  input: true,
  config: true,
  exec_config: true,
  idempotency_key: true,
  thread_id: true,
  on_busy: true,
  state: true,
  stream: true,
  enqueued_by: true,
  tenant: true,
  priority: true,
} as const satisfies Record<keyof EnqueueRequest | 'stream', true>;

/**
 * Refuses an enqueue option arcflow does not know (`threadId`, `exec-config`), naming the nearest
 * known one: a misspelt option silently dropped would queue another run than the one meant (one on
 * no thread, one calling a real provider).
 */
export function checkEnqueueOptions(request: object): void {
  const known = Object.keys(ENQUEUE_OPTIONS);
  for (const key of Object.keys(request)) {
    if (Object.hasOwn(ENQUEUE_OPTIONS, key)) continue;
    const nearest = nearestKey(key.replaceAll('-', '_'), known);
    throw new RequestError('invalid_request', `unknown enqueue option '${clipped(key)}'${nearest ? `; did you mean '${nearest}'?` : ''} (options: ${known.join(', ')})`);
  }
}
