import type { ApprovalResolution, EventDraft, PendingApproval } from '@arcflow/core';
import type { JobsOptions } from 'bullmq';
import type { ToolJobData } from '../../jobs/jobs.ts';
import { readArchive } from '../../records/archive.ts';
import { RUN_KEY_SUFFIX } from '../../redis/keys.ts';
import type { StoreContext } from '../../store-context.ts';

/** A waiting call's request as kept: what approvers see, and the tool job that runs the call if approved. */
export interface StoredApproval extends PendingApproval {
  readonly tool_job: ToolJobData;
  readonly tool_job_options: JobsOptions;
  /** The tool has a `concurrency` cap: its jobs go to the one queue under the prefix's tag. */
  readonly tool_capped?: boolean;
}

/** How a resolution went: resolved now (with the round's open calls left), before, too late (the run ended), or never asked. */
export type ResolveOutcome =
  | { readonly status: 'resolved'; readonly resolution: ApprovalResolution; readonly request: StoredApproval; readonly openInRound: number }
  | { readonly status: 'resolved_before'; readonly resolution: ApprovalResolution; readonly request: StoredApproval }
  | { readonly status: 'run_ended'; readonly request: StoredApproval }
  | { readonly status: 'never_waited' };

/** What a resolution writes: the decision, its record, and (unless approved) the call's result and terminal event. */
export interface ApprovalDecision {
  readonly decision: 'approved' | 'rejected' | 'timed_out';
  readonly resolution: ApprovalResolution;
  readonly resolved?: EventDraft;
  readonly result?: { readonly content: string; readonly terminal: EventDraft & { readonly error_code?: string } };
}

/** Calls waiting for a person, in Redis (`requestApproval`, `resolveApproval`: each write once). */
export class ApprovalStore {
  constructor(private readonly context: StoreContext) {}

  /**
   * Starts a call waiting. `status` is its status when it was requested before (or `closed` when it
   * has its result already), `conflict` when another call of the run waits under its id; undefined
   * when the run has ended.
   */
  async request(run_id: string, request: StoredApproval, event: EventDraft): Promise<{ requestedNow: true } | { requestedNow: false; status: string } | undefined> {
    const [outcome, status] = (await this.context.scripts.requestApproval([this.context.keys.record(run_id)], {
      step_id: request.step_id,
      iteration: request.iteration,
      tool_call_id: request.tool_call_id,
      request: JSON.stringify(request),
      event: this.context.codec.eventJson(event),
    })) as [number, string?];
    if (outcome === -1) return undefined;
    if (outcome === -2) return { requestedNow: false, status: 'conflict' };
    return outcome === 1 ? { requestedNow: true } : { requestedNow: false, status: status ?? 'pending' };
  }

  async resolve(run_id: string, tool_call_id: string, decision: ApprovalDecision): Promise<ResolveOutcome> {
    const terminal = decision.result?.terminal;
    const [outcome, first, second] = (await this.context.scripts.resolveApproval([this.context.keys.record(run_id)], {
      tool_call_id,
      decision: decision.decision,
      resolution: JSON.stringify(decision.resolution),
      resolved: decision.resolved ? this.context.codec.eventJson(decision.resolved) : '',
      content: decision.result?.content ?? '',
      terminal: terminal ? this.context.codec.eventJson(terminal) : '',
      code: (terminal as { error_code?: string } | undefined)?.error_code ?? '',
    })) as [number, (string | number)?, string?];
    switch (outcome) {
      case 1:
        return { status: 'resolved', resolution: decision.resolution, request: JSON.parse(first as string) as StoredApproval, openInRound: Number(second ?? 0) };
      case 0:
        return { status: 'resolved_before', resolution: JSON.parse(first as string) as ApprovalResolution, request: JSON.parse(second as string) as StoredApproval };
      case -1:
        return { status: 'run_ended', request: JSON.parse(first as string) as StoredApproval };
      default:
        return { status: 'never_waited' };
    }
  }

  /** A call's request, if it ever waited in this run. */
  async get(run_id: string, tool_call_id: string): Promise<StoredApproval | undefined> {
    const { redis, keys } = this.context;
    const json = (await redis.hget(keys.run(run_id).approvals, tool_call_id)) ?? (await readArchive(redis, keys, run_id))?.hash(RUN_KEY_SUFFIX.approvals)[tool_call_id];
    return json ? (JSON.parse(json) as StoredApproval) : undefined;
  }

  /** The run's calls waiting now, oldest request first. */
  async pending(run_id: string): Promise<PendingApproval[]> {
    const fields = await this.context.redis.hgetall(this.context.keys.run(run_id).approvals);
    const waiting: PendingApproval[] = [];
    for (const [field, value] of Object.entries(fields)) {
      if (field.includes('|') || fields[`${field}|status`] !== 'pending') continue;
      const { step_id, iteration, tool_call_id, tool_name, arguments: args, requested_at, expires_at } = JSON.parse(value) as StoredApproval;
      waiting.push({ step_id, iteration, tool_call_id, tool_name, arguments: args, requested_at, expires_at });
    }
    return waiting.sort((a, b) => a.requested_at - b.requested_at);
  }
}
