import { RequestError } from '../errors.ts';

/** What a thread id may be (SPEC §11): 1 to 128 of letters, digits, `_ . : -`. */
export const THREAD_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * What a run enqueued on a busy thread does (SPEC §11): waits its turn (`queue`, the default),
 * gives its input to the active run (`steer`), or is refused (`reject`).
 */
export const OnBusy = { queue: 'queue', steer: 'steer', reject: 'reject' } as const;
export type OnBusy = (typeof OnBusy)[keyof typeof OnBusy];

/** A thread id as given to enqueue or a thread's routes, checked: `invalid_request` naming `thread_id` when it is not one. */
export function checkThreadId(thread_id: unknown): string {
  if (typeof thread_id !== 'string' || !THREAD_ID_PATTERN.test(thread_id)) {
    throw new RequestError(
      'invalid_request',
      `thread_id must match ${THREAD_ID_PATTERN.source} (1 to 128 of letters, digits, '_', '.', ':', '-'), got ${JSON.stringify(thread_id)?.slice(0, 140)}`,
    );
  }
  return thread_id;
}

/** An `on_busy` option, checked (absent: `queue`). */
export function checkOnBusy(on_busy: unknown): OnBusy {
  if (on_busy === undefined) return OnBusy.queue;
  if (on_busy === OnBusy.queue || on_busy === OnBusy.steer || on_busy === OnBusy.reject) return on_busy;
  throw new RequestError('invalid_request', `on_busy must be 'queue', 'steer' or 'reject', got ${JSON.stringify(on_busy)?.slice(0, 40)}`);
}
