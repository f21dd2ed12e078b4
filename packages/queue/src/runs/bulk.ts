import { checkTenantName } from '../tenancy/options.ts';
import { RequestError, type RunRecord, TERMINAL_STATUSES } from '@arcflow/core';
import { checkListQuery } from './list-query.ts';
import { retriable } from './fork.ts';

/** A bulk action (SPEC §15): retry or cancel every run that matches a filter. */
export interface BulkRequest {
  action: 'retry' | 'cancel';
  filter: { status: RunRecord['status']; agent?: string; tenant?: string; since?: string };
  /** Counts and names the runs it would act on, and changes nothing. */
  dry_run?: boolean;
}

/** What a bulk action did: how many runs matched, how many it acted on, and those runs (in a dry run, those it would act on). */
export interface BulkOutcome {
  readonly matched: number;
  readonly acted: number;
  readonly run_ids: string[];
}

/** What a bulk action does to one run: true when it acted (a retry created now, a cancel that cancelled). */
export interface BulkActions {
  list(query: { status: RunRecord['status']; agent?: string; tenant?: string; limit: number; cursor?: string }): Promise<{ runs: RunRecord[]; next_cursor?: string }>;
  retry(run_id: string): Promise<boolean>;
  cancel(run_id: string): Promise<boolean>;
}

/** Runs read per page of the listing a bulk action walks. */
const PAGE = 200;

/** A bulk request checked, or a clear `invalid_request` naming the field. */
export function checkBulkRequest(request: BulkRequest): BulkRequest & { readonly since_ms?: number } {
  if (request?.action !== 'retry' && request?.action !== 'cancel')
    throw new RequestError('invalid_request', `action must be 'retry' or 'cancel', got ${JSON.stringify(request?.action)?.slice(0, 40)}`);
  const filter = request.filter;
  if (typeof filter !== 'object' || filter === null) throw new RequestError('invalid_request', 'filter must be an object with a status');
  if (filter.status === undefined) throw new RequestError('invalid_request', 'filter.status is required');
  checkListQuery({ status: filter.status, ...(filter.agent !== undefined ? { agent: filter.agent } : {}) });
  if (filter.tenant !== undefined) checkTenantName('filter.tenant', filter.tenant);
  const since_ms = filter.since === undefined ? undefined : Date.parse(filter.since);
  if (since_ms !== undefined && (typeof filter.since !== 'string' || Number.isNaN(since_ms))) {
    throw new RequestError('invalid_request', `filter.since must be an ISO 8601 time, got ${JSON.stringify(filter.since)?.slice(0, 60)}`);
  }
  if (request.dry_run !== undefined && typeof request.dry_run !== 'boolean') throw new RequestError('invalid_request', 'dry_run must be true or false');
  return { ...request, ...(since_ms !== undefined ? { since_ms } : {}) };
}

/**
 * Acts on every run the filter matches, newest first. Safe to repeat: a run retried before (by any
 * bulk action or `client.retry`) is not retried again, and a cancel of an ended run does nothing.
 */
export async function bulkAction(actions: BulkActions, unchecked: BulkRequest): Promise<BulkOutcome> {
  const request = checkBulkRequest(unchecked);
  const { status, agent, tenant } = request.filter;
  const matched: RunRecord[] = [];
  let cursor: string | undefined;
  do {
    // The listing keeps one tenant's runs (SPEC §14; `default`: the runs enqueued with none).
    const page = await actions.list({
      status,
      ...(agent !== undefined ? { agent } : {}),
      ...(tenant !== undefined ? { tenant } : {}),
      limit: PAGE,
      ...(cursor !== undefined ? { cursor } : {}),
    });
    for (const run of page.runs) {
      if (request.since_ms !== undefined && run.created_at < request.since_ms) continue;
      matched.push(run);
    }
    cursor = page.next_cursor;
  } while (cursor !== undefined);
  const candidates = matched.filter((run) => (request.action === 'retry' ? retriable(run) : !TERMINAL_STATUSES.has(run.status)));
  if (request.dry_run) return { matched: matched.length, acted: 0, run_ids: candidates.map((run) => run.run_id) };
  const run_ids: string[] = [];
  for (const run of candidates) if (await actedOn(request.action === 'retry' ? actions.retry(run.run_id) : actions.cancel(run.run_id))) run_ids.push(run.run_id);
  return { matched: matched.length, acted: run_ids.length, run_ids };
}

/** Refusals of one run alone: its tenant over its `runs_per_minute`, a run gone or changed meanwhile. */
const REFUSALS_OF_ONE_RUN: ReadonlySet<string> = new Set(['tenant_rate_limited', 'unknown_run', 'invalid_request']);

/**
 * Whether one run's action was taken. A refusal of that run alone leaves it out and the action
 * goes on with the others; anything else (Redis away: `redis_unavailable`) stops the action, and
 * what was done stands.
 */
async function actedOn(action: Promise<unknown>): Promise<boolean> {
  try {
    return Boolean(await action);
  } catch (error) {
    if (error instanceof RequestError && REFUSALS_OF_ONE_RUN.has(error.code)) return false;
    throw error;
  }
}
