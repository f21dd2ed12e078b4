import type { EventDraft, PendingApproval, SettledCall } from '@arcflow/core';
import type { JobsOptions } from 'bullmq';
import type { ToolJobData, WaitKind } from '../../jobs/jobs.ts';
import type { StoreContext } from '../../store-context.ts';

/** The kinds of waiting call (see waiting-call.ts, the contract): a person's approval, a result from outside. */
export type { WaitKind };

/** What a wait for a result needs to know of its tool, kept with the request (the answering process has no tool definitions). */
export interface ResultTerms {
  readonly timeout_ms: number;
  readonly max_result_bytes: number;
  readonly input_schema_hash: string;
  readonly output_schema?: unknown;
}

/** A waiting call's request as kept: what answerers see, and the tool job it stands for. */
export interface StoredWait extends PendingApproval {
  readonly tool_job: ToolJobData;
  readonly tool_job_options: JobsOptions;
  /** The tool has a `concurrency` cap: its jobs go to the one queue under the prefix's tag. */
  readonly tool_capped?: boolean;
  /** An external tool's call (its approval, then its result), or a deferred call: how it waits for its result. */
  readonly result?: ResultTerms;
  /** When the call started (a deferred call: before its handler ran), for its duration. */
  readonly started_at?: number;
  /** A deferred handler's run-state changes (SPEC §17), kept with the result if it completes. */
  readonly changes?: readonly unknown[];
}

/** A planned call's request to park, waiting `timeout_ms` from now; `extra` adds what its kind keeps. */
export function waitRequest(
  planned: { readonly call: { readonly id: string }; readonly tool: { readonly name: string }; readonly args: unknown },
  place: { readonly step_id: string; readonly iteration: number },
  tool_job: ToolJobData,
  timeout_ms: number,
  extra: Partial<Pick<StoredWait, 'tool_job_options' | 'tool_capped' | 'result' | 'started_at' | 'changes'>>,
): StoredWait {
  const now = Date.now();
  return {
    step_id: place.step_id,
    iteration: place.iteration,
    tool_call_id: planned.call.id,
    tool_name: planned.tool.name,
    arguments: planned.args,
    requested_at: now,
    expires_at: now + timeout_ms,
    tool_job,
    tool_job_options: extra.tool_job_options ?? {},
    ...(extra.tool_capped !== undefined ? { tool_capped: extra.tool_capped } : {}),
    ...(extra.result ? { result: extra.result } : {}),
    started_at: extra.started_at ?? now,
    ...(extra.changes && extra.changes.length > 0 ? { changes: extra.changes } : {}),
  };
}

/** What a parked call adds to its run's stream (SPEC §12, §20), without its offset. */
export type WaitChunk =
  | { readonly type: 'tool_approval'; readonly step_id: string; readonly iteration: number; readonly tool_call_id: string; readonly tool_name: string }
  | { readonly type: 'tool_input'; readonly step_id: string; readonly iteration: number; readonly tool_call_id: string; readonly tool_name: string; readonly input: unknown };

/** A waiting call's stream chunk of `type`, from its request. */
export function waitChunk(type: 'tool_approval' | 'tool_input', request: StoredWait): WaitChunk {
  const { step_id, iteration, tool_call_id, tool_name } = request;
  return type === 'tool_approval' ? { type, step_id, iteration, tool_call_id, tool_name } : { type, step_id, iteration, tool_call_id, tool_name, input: request.arguments };
}

/** What settling writes: the decision, its record, and (unless the call goes on) its result and terminal event. */
export interface WaitDecision<Resolution> {
  readonly decision: 'approved' | 'rejected' | 'timed_out' | 'answered';
  readonly resolution: Resolution;
  readonly resolved?: EventDraft;
  readonly result?: SettledCall;
}

/** How settling went: settled now (with the round's open calls left), before, too late (the run ended), or never parked. */
export type SettleOutcome<Resolution> =
  | { readonly status: 'settled'; readonly resolution: Resolution; readonly request: StoredWait; readonly openInRound: number }
  | { readonly status: 'settled_before'; readonly resolution: Resolution; readonly request: StoredWait; readonly decision: string }
  | { readonly status: 'run_ended'; readonly request: StoredWait }
  | { readonly status: 'never_waited' };

/** Waiting calls of one kind, in Redis (`parkCall`, `settleCall`: each writes once). */
export class WaitingStore<Resolution> {
  constructor(
    private readonly kind: WaitKind,
    private readonly context: StoreContext,
  ) {}

  private hash(run_id: string): string {
    const keys = this.context.keys.run(run_id);
    return this.kind === 'approval' ? keys.approvals : keys.toolResults;
  }

  /**
   * Parks a call. `status` is how it stands when it was parked before (or `closed` when it has its
   * result already), `conflict` when another call of the run waits under its id; undefined when
   * the run has ended.
   */
  async park(run_id: string, request: StoredWait, event: EventDraft, chunk?: WaitChunk): Promise<{ parkedNow: true } | { parkedNow: false; status: string } | undefined> {
    const [outcome, status] = (await this.context.scripts.parkCall([this.context.keys.record(run_id)], {
      kind: this.kind,
      step_id: request.step_id,
      iteration: request.iteration,
      tool_call_id: request.tool_call_id,
      request: JSON.stringify(request),
      event: this.context.codec.eventJson(event),
      expires_at: request.expires_at,
      chunk: chunk ? JSON.stringify(chunk) : '',
    })) as [number, string?];
    if (outcome === -1) return undefined;
    if (outcome === -2) return { parkedNow: false, status: 'conflict' };
    return outcome === 1 ? { parkedNow: true } : { parkedNow: false, status: status ?? 'pending' };
  }

  async settle(run_id: string, tool_call_id: string, decision: WaitDecision<Resolution>): Promise<SettleOutcome<Resolution>> {
    const terminal = decision.result?.terminal;
    const [outcome, first, second, third] = (await this.context.scripts.settleCall([this.context.keys.record(run_id)], {
      kind: this.kind,
      tool_call_id,
      decision: decision.decision,
      resolution: JSON.stringify(decision.resolution),
      resolved: decision.resolved ? this.context.codec.eventJson(decision.resolved) : '',
      content: decision.result?.content ?? '',
      terminal: terminal ? this.context.codec.eventJson(terminal) : '',
      code: (terminal as { error_code?: string } | undefined)?.error_code ?? '',
      changes: decision.result?.changes ? JSON.stringify(decision.result.changes) : '',
    })) as [number, (string | number)?, string?, string?];
    switch (outcome) {
      case 1:
        return { status: 'settled', resolution: decision.resolution, request: JSON.parse(first as string) as StoredWait, openInRound: Number(second ?? 0) };
      case 0:
        return { status: 'settled_before', resolution: JSON.parse(first as string) as Resolution, request: JSON.parse(second as string) as StoredWait, decision: third ?? '' };
      case -1:
        return { status: 'run_ended', request: JSON.parse(first as string) as StoredWait };
      default:
        return { status: 'never_waited' };
    }
  }

  /** A call's request, if it ever waited for this in this run. */
  async get(run_id: string, tool_call_id: string): Promise<StoredWait | undefined> {
    const json = (await this.context.redis.hget(this.hash(run_id), tool_call_id)) ?? (await this.kept(run_id))[tool_call_id];
    return json ? (JSON.parse(json) as StoredWait) : undefined;
  }

  /** How a call's wait was settled and with what, once it is (undefined while it waits, or if it never did). */
  async settled(run_id: string, tool_call_id: string): Promise<{ readonly decision: string; readonly resolution: Resolution } | undefined> {
    const [status, resolution] = await this.callFields(run_id, tool_call_id, 'status', 'resolution');
    if (!status || status === 'pending' || !resolution) return undefined;
    return { decision: status, resolution: JSON.parse(resolution) as Resolution };
  }

  /** How a call's wait stands (pending, or how it was settled), if it ever waited at this place. */
  async statusAt(run_id: string, tool_call_id: string, place: { step_id: string; iteration: number }): Promise<string | undefined> {
    const [at, status] = await this.callFields(run_id, tool_call_id, 'place', 'status');
    return at === `${place.step_id}|${place.iteration}` ? (status ?? undefined) : undefined;
  }

  /**
   * Fields `<tool_call_id>|<name>` of a call's wait: from the run's hash of this kind, or, when the
   * first is not there, from what a compacted run keeps in its record.
   */
  private async callFields(run_id: string, tool_call_id: string, ...names: [string, ...string[]]): Promise<(string | null)[]> {
    const fields = names.map((name) => `${tool_call_id}|${name}`);
    const live = await this.context.redis.hmget(this.hash(run_id), ...fields);
    if (live[0] !== null) return live;
    const kept = await this.kept(run_id);
    return fields.map((field) => kept[field] ?? null);
  }

  /** The waits of this kind a compacted run keeps in its record (runs/compactRun.lua); empty for any other run. */
  private async kept(run_id: string): Promise<Record<string, string>> {
    const json = await this.context.redis.hget(this.context.keys.record(run_id), this.kind === 'approval' ? 'approvals' : 'tool_results');
    return json ? (JSON.parse(json) as Record<string, string>) : {};
  }

  /** The run's calls waiting now, oldest request first. */
  async pending(run_id: string): Promise<PendingApproval[]> {
    return (await this.pendingRequests(run_id)).map(({ step_id, iteration, tool_call_id, tool_name, arguments: args, requested_at, expires_at }) => ({
      step_id,
      iteration,
      tool_call_id,
      tool_name,
      arguments: args,
      requested_at,
      expires_at,
    }));
  }

  /** The run's calls waiting now, as kept (with their tool jobs), oldest request first. */
  async pendingRequests(run_id: string): Promise<StoredWait[]> {
    const fields = await this.context.redis.hgetall(this.hash(run_id));
    const waiting: StoredWait[] = [];
    for (const [field, value] of Object.entries(fields)) {
      if (field.includes('|') || fields[`${field}|status`] !== 'pending') continue;
      waiting.push(JSON.parse(value) as StoredWait);
    }
    return waiting.sort((a, b) => a.requested_at - b.requested_at);
  }
}
