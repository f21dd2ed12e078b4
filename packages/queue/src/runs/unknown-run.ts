import { RequestError } from '@arcflow/core';

/**
 * `unknown_run`, naming the key prefix the run was looked for under: a run enqueued under another
 * prefix (a client or CLI started without the workers' `ARCFLOW_PREFIX`) shows as such.
 */
export function unknownRun(run_id: string, prefix: string): RequestError {
  return new RequestError('unknown_run', `unknown run '${run_id}' (looked under prefix '${prefix}')`);
}
