import { checkTenantName } from '../tenancy/options.ts';
import { NamePattern, RequestError, type RunRecord } from '@arcflow/core';

/** Runs a listing returns when it is not told how many. */
export const LIST_LIMIT_DEFAULT = 50;

/** A listing's filters and page (SPEC §5). */
export interface ListQuery {
  status?: RunRecord['status'];
  agent?: string;
  /** Only the runs of this tenant (SPEC §14; `default`: the runs enqueued with none). */
  tenant?: string;
  /** At most this many runs (1–1000, default 50). */
  limit?: number;
  /** `next_cursor` of the page before. */
  cursor?: string;
}

const RUN_STATUSES: ReadonlySet<string> = new Set(['queued', 'running', 'waiting', 'completed', 'failed', 'cancelled']);
const LIST_CURSOR = /^\d{1,16}:[A-Za-z0-9_-]{1,100}$/;

/** A listing's query checked and resolved, or a clear error naming what is wrong. */
export function checkListQuery(query: ListQuery = {}): { status?: RunRecord['status']; agent?: string; tenant?: string; limit: number; cursor?: string } {
  const { status, agent, tenant, cursor } = query;
  const limit = query.limit ?? LIST_LIMIT_DEFAULT;
  if (status !== undefined && !RUN_STATUSES.has(status)) {
    throw new RequestError('invalid_request', `status must be one of ${[...RUN_STATUSES].join(', ')}, got ${JSON.stringify(status)?.slice(0, 60)}`);
  }
  if (agent !== undefined && (typeof agent !== 'string' || !NamePattern.agent.test(agent))) {
    throw new RequestError('invalid_request', `agent must match ${NamePattern.agent}, got ${JSON.stringify(agent)?.slice(0, 120)}`);
  }
  if (tenant !== undefined) checkTenantName('tenant', tenant);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new RequestError('invalid_request', `limit must be an integer from 1 to 1000, got ${JSON.stringify(limit)}`);
  if (cursor !== undefined && (typeof cursor !== 'string' || !LIST_CURSOR.test(cursor))) throw new RequestError('invalid_request', 'cursor is not one a listing returned');
  return { status, agent, ...(tenant !== undefined ? { tenant } : {}), limit, cursor };
}
