import { type ChildEnding, type RunSpent, childRunId } from '@arcflow/core';
import { type ToolJobData, malformedJobData } from '../../jobs/jobs.ts';
import type { StoreContext } from '../../store-context.ts';

/**
 * The call of its parent that a child run settles when it ends (SPEC §13), kept in the child's
 * record: the call's tool job (without its arguments), when the call started, and how much of the
 * child's answer the parent's model may read.
 */
export interface ParentCall {
  readonly job: Omit<ToolJobData, 'args'>;
  readonly started_at: number;
  readonly max_result_bytes: number;
}

/** What a child run's record adds: where it stands among runs. */
export interface ChildLineage {
  readonly parent: ParentCall;
  /** 1 for a child of a run without a parent, 2 for its child, … */
  readonly depth: number;
}

/** An ended child run, as its parent's call takes it. */
export interface EndedChild {
  readonly parent: ParentCall;
  readonly ending: ChildEnding;
  readonly finished_at: number;
  /** What the child and its own children spent (SPEC §10 budgets count it toward the parent). */
  readonly spend: RunSpent;
}

const ENDED_FIELDS = [
  'status',
  'output',
  'error',
  'parent_call',
  'usage_total',
  'tool_calls',
  'children_tokens',
  'children_tool_calls',
  'finished_at',
  'usage_cost_micros',
  'children_cost_micros',
] as const;

/** The records' fields that tie child runs to their parents' calls. */
export class ChildStore {
  constructor(private readonly context: StoreContext) {}

  /** The call that started a child counts as waiting outside, once (`parkChild.lua`): a run whose every open call waits outside is off the watchdog's scan. */
  async waitFor(run_id: string, place: { step_id: string; iteration: number }, tool_call_id: string): Promise<void> {
    await this.context.scripts.parkChild([this.context.keys.record(run_id)], [place.step_id, place.iteration, tool_call_id]);
  }

  /** The record fields of a new child run. */
  static fields(lineage: ChildLineage): Record<string, string> {
    return {
      parent_run_id: lineage.parent.job.run_id,
      parent_tool_call_id: lineage.parent.job.tool_call_id,
      parent_call: JSON.stringify(lineage.parent),
      depth: String(lineage.depth),
    };
  }

  /**
   * Where a run stands, for a child it starts: how deep it is among runs (0 for one without a
   * parent, and for one not found), and what it has spent, its children's spend included.
   */
  async standing(run_id: string): Promise<{ depth: number; spent: RunSpent }> {
    const [depth, usage_total, tool_calls, children_tokens, children_tool_calls, usage_cost, children_cost] = await this.context.redis.hmget(
      this.context.keys.record(run_id),
      'depth',
      'usage_total',
      'tool_calls',
      'children_tokens',
      'children_tool_calls',
      'usage_cost_micros',
      'children_cost_micros',
    );
    return { depth: wholeCount(depth), spent: spentOf(usage_total, tool_calls, children_tokens, children_tool_calls, usage_cost, children_cost) };
  }

  /** A run's agent (or workflow) name, which names its provider queue; undefined when it does not exist. */
  async agentOf(run_id: string): Promise<string | undefined> {
    return (await this.context.redis.hget(this.context.keys.record(run_id), 'agent')) ?? undefined;
  }

  /**
   * A child run that has ended, with the call of its parent it settles; undefined for a run that
   * has not ended, has no parent, or whose parent link another process wrote unreadable.
   */
  async ended(run_id: string): Promise<EndedChild | undefined> {
    const [status, output, error, parent_call, usage_total, tool_calls, children_tokens, children_tool_calls, finished_at, usage_cost, children_cost] =
      await this.context.redis.hmget(this.context.keys.record(run_id), ...ENDED_FIELDS);
    if ((status !== 'completed' && status !== 'failed' && status !== 'cancelled') || !parent_call) return undefined;
    const parent = readParentCall(parent_call, run_id);
    if (!parent) return undefined;
    const error_code = status === 'failed' ? errorCodeOf(error) : undefined;
    return {
      parent,
      ending: { status, ...(output != null ? { output } : {}), ...(error_code ? { error_code } : {}) },
      finished_at: Number(finished_at) || Date.now(),
      spend: spentOf(usage_total, tool_calls, children_tokens, children_tool_calls, usage_cost, children_cost),
    };
  }
}

function errorCodeOf(error: string | null | undefined): string {
  try {
    const code = (JSON.parse(error ?? '{}') as { error_code?: unknown }).error_code;
    return typeof code === 'string' && code !== '' ? code : 'failed';
  } catch {
    return 'failed';
  }
}

type Field = string | null | undefined;

/**
 * What a run has spent, from its record's counters: its own and its child runs' tokens and tool
 * calls, and (once a priced call was made, SPEC §14) their cost in micro-dollars.
 */
export function spentOf(usage_total: Field, tool_calls: Field, children_tokens: Field, children_tool_calls: Field, usage_cost: Field, children_cost: Field): RunSpent {
  const priced = usage_cost != null || children_cost != null;
  return {
    tokens: wholeCount(usage_total) + wholeCount(children_tokens),
    tool_calls: wholeCount(tool_calls) + wholeCount(children_tool_calls),
    ...(priced ? { cost_micros: wholeCount(usage_cost) + wholeCount(children_cost) } : {}),
  };
}

/** A count as the scripts take and keep it: a whole number, 0 for anything else (another process may have written the field). */
export function wholeCount(value: number | string | null | undefined): number {
  const number = Number(value);
  return Number.isSafeInteger(number) && number > 0 ? number : 0;
}

/**
 * The parent link as stored, if it is one this engine wrote for this child: the shape of a tool
 * job's data, naming the call this child's id was derived from (a link another process wrote
 * cannot settle some other run's call).
 */
function readParentCall(json: string, child_run_id: string): ParentCall | undefined {
  try {
    const parent = JSON.parse(json) as ParentCall;
    const job = { ...parent?.job, args: undefined } as ToolJobData;
    if (malformedJobData(job) !== undefined || typeof job.trace !== 'object' || job.trace === null) return undefined;
    if (childRunId(job.run_id, job.step_id, job.iteration, job.tool_call_id) !== child_run_id) return undefined;
    if (!Number.isSafeInteger(parent.started_at) || !Number.isSafeInteger(parent.max_result_bytes) || parent.max_result_bytes < 1) return undefined;
    if (!Number.isSafeInteger(job.join.attempts) || job.join.attempts < 1) return undefined;
    return parent;
  } catch {
    return undefined;
  }
}
