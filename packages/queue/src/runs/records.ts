import {
  type ApprovalResolution,
  type ChatMessage,
  type EventDraft,
  type ForkedFrom,
  RUN_STEP_ID,
  type RunError,
  type RunRecord,
  type RunState,
  type RunStatus,
  TERMINAL_STATUSES,
  type ToolResultAnswer,
  stateAsChanges,
  usdOf,
} from '@arcflow/core';
import type { WaitingStore } from '../calls/waiting/waiting-store.ts';
import { type ChildLineage, ChildStore, wholeCount } from '../calls/waiting/child-store.ts';
import { readArchive } from '../records/archive.ts';
import { StoredFormatError, isWrongType, refuseWrongType, writeResponse } from '../records/formats.ts';
import { writeInput } from '../records/input-format.ts';
import { stateLogKey } from '../redis/keys.ts';
import { readOutput } from '../records/output-format.ts';
import { type RunSpec, SPEC_FIELDS, specFrom } from '../records/run-spec.ts';
import type { PartitionMap } from '../redis/partition-map.ts';
import { partitionOf, partitionOfKey, partitionTag } from '../redis/partitions.ts';
import { foldEntries } from '../steps/state-log.ts';
import type { RecordedRound } from '../steps/step-store.ts';
import type { StoreContext } from '../store-context.ts';
import type { WorkflowStore } from '../workflows/workflow-store.ts';
import { storedOwner } from '../tenancy/options.ts';

/** A workflow run's steps as created: each in graph order with its first status, and the roots' `StepStarted`. */
export interface InitialSteps {
  readonly statuses: readonly (readonly [string, 'pending' | 'running' | 'completed'])[];
  readonly started: readonly EventDraft[];
}

/**
 * What a fork (SPEC §15) creates its run with, beside an enqueue's fields: where it was forked
 * from, the source's recorded rounds it replays (by step: its first `copied` rounds), the thread
 * it branches (a new thread's first messages), and for a retry, the source run that gets
 * `retried_by`, once.
 */
export interface ForkCopy {
  readonly forked_from: ForkedFrom;
  readonly rounds: readonly (RecordedRound & { readonly step_id: string })[];
  /** Per step: how many of its first rounds were copied. */
  readonly copied: Readonly<Record<string, number>>;
  readonly thread?: { readonly thread_id: string; readonly messages: readonly ChatMessage[] };
  /** A retry: the source run is marked `retried_by` this run, unless a retry of it exists (then that run's id is the answer). */
  readonly retry?: boolean;
  /** A workflow run's fork: the steps that start with it, and those it keeps, completed, with their recorded outputs. */
  readonly workflow?: { readonly start: readonly string[]; readonly kept: readonly (readonly [string, string])[] };
}

/** A run's record: created once (with its idempotency key), read as a spec by workers and as a `RunRecord` by clients. */
export class RunRecords {
  constructor(
    private readonly context: StoreContext,
    private readonly parts: {
      readonly workflows: WorkflowStore;
      readonly approvals: WaitingStore<ApprovalResolution>;
      readonly toolResults: WaitingStore<ToolResultAnswer>;
      readonly partitions: PartitionMap;
    },
  ) {}

  /**
   * Creates a run with its `RunEnqueued` event; with an idempotency key already seen, returns that
   * run's id. A child run (SPEC §13) is created with its `lineage`.
   */
  async createRun(
    spec: Omit<RunSpec, 'status'> & { readonly lineage?: ChildLineage; readonly enqueued_by?: string; readonly tenant?: string; readonly priority?: number },
    idempotency_key: string | undefined,
    enqueued: EventDraft,
    steps?: InitialSteps,
    state?: RunState,
    request_hash?: string,
    fork?: ForkCopy,
  ): Promise<{ created: boolean; run_id: string }> {
    const { keys, scripts, codec } = this.context;
    const now = Date.now();
    const fields: Record<string, string> = {
      run_id: spec.run_id,
      status: 'queued',
      agent: spec.agent,
      ...writeInput(spec.input),
      config: JSON.stringify(spec.config ?? null),
      exec_config: JSON.stringify(spec.exec_config ?? null),
      trace: JSON.stringify(spec.trace),
      definition_hash: spec.definition_hash,
      ...(spec.stream !== undefined ? { stream: spec.stream ? '1' : '0' } : {}),
      ...(spec.enqueued_by !== undefined ? { enqueued_by: spec.enqueued_by } : {}),
      ...(spec.tenant !== undefined ? { tenant: spec.tenant } : {}),
      ...(spec.priority !== undefined ? { priority: String(spec.priority) } : {}),
      created_at: String(now),
      usage_input: '0',
      usage_output: '0',
      usage_total: '0',
      iterations: '0',
      ...(steps ? { workflow: spec.agent } : {}),
      // Given at enqueue (even `{}`): a run on a thread then does not take the state its thread left.
      ...(state ? { state_given: '1' } : {}),
      ...(spec.lineage ? ChildStore.fields(spec.lineage) : {}),
      // What its idempotency key stands for: a repeat of the key with another request is refused.
      ...(request_hash ? { request_hash } : {}),
      ...(fork ? forkFields(fork) : {}),
    };
    const [created, run_id] = (await scripts.createRun([keys.record(spec.run_id), keys.idempotency(idempotency_key ?? spec.run_id, keys.tagOf(spec.run_id))], {
      run_id: spec.run_id,
      use_idempotency: idempotency_key !== undefined,
      fields,
      enqueued: codec.eventJson(enqueued, now),
      ...(steps ? { steps: steps.statuses, started: codec.pairs(steps.started.map((event) => ({ event }))) } : {}),
      ...(state && Object.keys(state).length > 0 ? { state_entry: JSON.stringify(stateAsChanges(state)), state_step: steps ? RUN_STEP_ID : 's1' } : {}),
      ...(fork ? { fork: forkArgument(this.context, fork) } : {}),
    })) as [number, string];
    return { created: created === 1, run_id };
  }

  /**
   * What an ended run's root span is made of, for the first caller only: that process emits it
   * (the claim expires with the run). Undefined for every later caller, and for a run that has not
   * ended or whose record is unreadable.
   */
  async claimRootSpan(run_id: string): Promise<RootSpanFacts | undefined> {
    const reply = await this.context.scripts.claimRootSpan([this.context.keys.record(run_id)], []);
    return Array.isArray(reply) ? rootSpanFacts(run_id, reply as (string | null)[]) : undefined;
  }

  async getSpec(run_id: string): Promise<RunSpec | undefined> {
    const fields = await this.context.redis.hmget(this.context.keys.record(run_id), ...SPEC_FIELDS, 'stream');
    return specFrom(run_id, fields, fields[SPEC_FIELDS.length] ?? null);
  }

  /** The request hash stored with a run enqueued with an idempotency key (see `idempotentRequestHash`). */
  async requestHash(run_id: string): Promise<string | undefined> {
    return (await this.context.redis.hget(this.context.keys.record(run_id), 'request_hash')) ?? undefined;
  }

  async status(run_id: string): Promise<RunStatus | undefined> {
    return ((await this.context.redis.hget(this.context.keys.record(run_id), 'status')) ?? undefined) as RunStatus | undefined;
  }

  /** The thread a run is on, if it is on one: one field, what checking an end user's token needs (SPEC §19). */
  async threadOf(run_id: string): Promise<string | undefined> {
    return (await this.context.redis.hget(this.context.keys.record(run_id), 'thread_id')) ?? undefined;
  }

  /** The run record as clients see it. */
  async getRun(run_id: string): Promise<RunRecord | undefined> {
    // Another process may have written something else under the run's key.
    const record = await this.context.redis.hgetall(this.context.keys.record(run_id)).catch(refuseWrongType(`record of run ${run_id}`));
    if (!record.status) return undefined;
    const steps = record.workflow ? await this.parts.workflows.stepRecords(run_id) : undefined;
    const open = record.status === 'waiting' || record.status === 'running';
    const [pending_approvals, pending_tool_results] = open ? await Promise.all([this.parts.approvals.pending(run_id), this.parts.toolResults.pending(run_id)]) : [[], []];
    const state = await this.runState(run_id, record.workflow ? RUN_STEP_ID : 's1', TERMINAL_STATUSES.has(record.status as RunStatus));
    return {
      run_id,
      status: record.status as RunStatus,
      agent: record.agent ?? '',
      ...(record.workflow ? { workflow: record.workflow, steps } : {}),
      ...readOutput(record.output, record.output_type),
      ...(record.error ? { error: storedRunError(record.error) } : {}),
      usage: usageOf(record),
      iterations: wholeCount(record.iterations),
      created_at: wholeCount(record.created_at),
      ...(record.finished_at ? { finished_at: wholeCount(record.finished_at) } : {}),
      partition: partitionOf(run_id) ?? 0,
      ...traceIdOf(record.trace),
      ...(record.parent_run_id ? { parent_run_id: record.parent_run_id, parent_tool_call_id: record.parent_tool_call_id ?? '' } : {}),
      ...(record.thread_id ? { thread_id: record.thread_id } : {}),
      ...(record.enqueued_by ? { enqueued_by: record.enqueued_by } : {}),
      ...storedOwner(record.tenant, record.priority),
      ...(record.steered_into ? { steered_into: record.steered_into } : {}),
      ...steeredFrom(record.steered_from),
      ...(pending_approvals.length > 0 ? { pending_approvals } : {}),
      ...(pending_tool_results.length > 0 ? { pending_tool_results } : {}),
      ...(state ? { state } : {}),
      ...forkedFrom(record.forked_from),
      ...(record.retried_by ? { retried_by: record.retried_by } : {}),
    };
  }

  /**
   * The run an idempotency key was first used for, wherever the partition count then put it: the
   * prefix's own tag, or the key's partition under each count the map has had.
   */
  async findIdempotent(key: string): Promise<string | undefined> {
    const { redis, keys, prefix } = this.context;
    const { history } = await this.parts.partitions.read();
    const tags = new Set([keys.tag, ...history.map((count) => partitionTag(prefix, partitionOfKey(key, count)))]);
    const found = await Promise.all([...tags].map((tag) => redis.get(keys.idempotency(key, tag))));
    return found.find((run_id) => run_id !== null) ?? undefined;
  }

  /**
   * A run's state as its last round left it (SPEC §17): every entry of its state log applied; `{}`
   * for none. Undefined when the log cannot be read (another process wrote it): the record goes
   * on without it.
   */
  private async runState(run_id: string, step_id: string, ended: boolean): Promise<RunState | undefined> {
    const { redis, keys } = this.context;
    try {
      let lines = await redis.lrange(keys.run(run_id).stateLog(step_id), 0, -1);
      // None in an ended run: it may be compacted (even since its record was read), its log in its archive.
      if (lines.length === 0 && ended) lines = [...((await readArchive(redis, keys, run_id))?.list(stateLogKey('', step_id)) ?? [])];
      return foldEntries({}, lines, 0, `state log of ${run_id}/${step_id}`);
    } catch (error) {
      if (error instanceof StoredFormatError || isWrongType(error)) return undefined;
      throw error;
    }
  }
}

/** A fork's own record fields: `forked_from` (JSON) and, per step, `copied|<step>`: how many of its first rounds it replays. */
function forkFields(fork: ForkCopy): Record<string, string> {
  const fields: Record<string, string> = { forked_from: JSON.stringify(fork.forked_from) };
  for (const [step_id, count] of Object.entries(fork.copied)) if (count > 0) fields[`copied|${step_id}`] = String(count);
  return fields;
}

/** A fork's part of `createRun`'s argument (see `createRun.lua`). */
function forkArgument(context: StoreContext, fork: ForkCopy): Record<string, unknown> {
  const flat = (pairs: Readonly<Record<string, string>>) => Object.entries(pairs).flat();
  return {
    rounds: fork.rounds.map((round) => ({
      step_id: round.step_id,
      iteration: round.iteration,
      response: writeResponse(unspent(round.recorded)),
      has_calls: round.recorded.response.tool_calls.length > 0,
      results: flat(round.results),
      changes: flat(round.changes),
    })),
    ...(fork.thread ? { thread_id: fork.thread.thread_id, thread_messages: fork.thread.messages.map((message) => JSON.stringify(message)) } : {}),
    ...(fork.retry ? { retry_of: context.keys.record(fork.forked_from.run_id) } : {}),
    ...(fork.workflow ? { outputs: fork.workflow.kept.flat() } : {}),
  };
}

/**
 * A copied round's response as a fork records it: its tokens were spent by the source run, so the
 * fork's usage, budgets and `TokensConsumed.cumulative` count none of them (docs/fork.md).
 */
function unspent(recorded: RecordedRound['recorded']): RecordedRound['recorded'] {
  return { ...recorded, response: { ...recorded.response, usage: { input: 0, output: 0, total: 0 } } };
}

/** The trace id of a run's stored trace (`{traceparent}`), as a record field. */
function traceIdOf(trace: string | undefined): { trace_id?: string } {
  const match = /"traceparent":"00-([0-9a-f]{32})-/.exec(trace ?? '');
  return match ? { trace_id: match[1]! } : {};
}

/** A record's `steered_from` (a JSON list of run ids, written by finish.lua), when it reads as one. */
function steeredFrom(text: string | undefined): { steered_from?: string[] } {
  if (!text) return {};
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) && value.every((id) => typeof id === 'string') ? { steered_from: value } : {};
  } catch {
    return {};
  }
}

/** A record's `forked_from` (JSON, written by createRun), when it reads as one. */
function forkedFrom(text: string | undefined): { forked_from?: ForkedFrom } {
  if (!text) return {};
  try {
    const value = JSON.parse(text) as Partial<ForkedFrom> | null;
    return value !== null && typeof value === 'object' && typeof value.run_id === 'string' ? { forked_from: value as ForkedFrom } : {};
  } catch {
    return {};
  }
}

/** A record's `error` (JSON, written by finish.lua); one another process wrote says the run's error cannot be read. */
function storedRunError(text: string): RunError {
  try {
    const value = JSON.parse(text) as Partial<RunError> | null;
    if (value !== null && typeof value === 'object' && typeof value.error_code === 'string' && typeof value.message === 'string' && typeof value.code === 'string')
      return value as RunError;
  } catch {}
  return { code: 'RunFailed', error_code: 'unreadable_state', message: "the run's stored error is not as arcflow writes it" };
}

/** What `emitRunSpan` needs of an ended run, from the fields `claimRootSpan.lua` reads. */
export interface RootSpanFacts {
  readonly trace: { readonly traceparent?: string; readonly request?: string; readonly parent?: string };
  readonly run_id: string;
  readonly agent: string;
  readonly workflow?: string;
  readonly created_at: number;
  readonly status: string;
  readonly usage: { readonly input: number; readonly output: number };
  readonly error_code?: string;
}

function rootSpanFacts(run_id: string, fields: readonly (string | null)[]): RootSpanFacts | undefined {
  const [trace, agent, workflow, created_at, status, usage_input, usage_output, error, finished_at] = fields;
  if (!trace || !agent || !status || !finished_at) return undefined;
  let parsedTrace: RootSpanFacts['trace'];
  let error_code: unknown;
  try {
    parsedTrace = JSON.parse(trace) as RootSpanFacts['trace'];
    error_code = error ? (JSON.parse(error) as { error_code?: unknown }).error_code : undefined;
  } catch {
    return undefined;
  }
  return {
    trace: parsedTrace,
    run_id,
    agent,
    ...(workflow ? { workflow } : {}),
    created_at: Number(created_at),
    status,
    usage: { input: Number(usage_input ?? 0), output: Number(usage_output ?? 0) },
    ...(typeof error_code === 'string' ? { error_code } : {}),
  };
}

/** A record's usage: its tokens, and its cost with its child runs' once a priced call was made (SPEC §14). */
function usageOf(record: Record<string, string>): RunRecord['usage'] {
  const tokens = { input: wholeCount(record.usage_input), output: wholeCount(record.usage_output), total: wholeCount(record.usage_total) };
  if (record.usage_cost_micros === undefined && record.children_cost_micros === undefined) return tokens;
  return { ...tokens, cost_usd: usdOf(wholeCount(record.usage_cost_micros) + wholeCount(record.children_cost_micros)) };
}
