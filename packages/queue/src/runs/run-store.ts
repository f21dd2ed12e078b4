import {
  type ApprovalResolution,
  type ToolResultAnswer,
  type CallPlace,
  type ChatMessage,
  type EventDraft,
  type RunSpent,
  type SkipReason,
  type RunError,
  type RunRecord,
  type RunInput,
  type RunStatus,
  type StepState,
  type RunState,
  type StateChange,
  type TraceEvent,
  RUN_STEP_ID,
  FIRST_TRY,
  type TryPosition,
  ToolResultText,
  applyTracePolicy,
  stateAsChanges,
} from '@arcflow/core';
import type { Redis } from 'ioredis';
import { type Keys, type RunKeys, keysFor } from '../redis/keys.ts';
import { type RecordedResponse, readResponse, readState, readTryPosition, writeResponse, writeState, writeTryPosition } from '../records/formats.ts';
import { ProviderPauses } from '../loop/provider-pauses.ts';
import { type ThreadPlace, Transcripts } from '../steps/transcripts.ts';
import { StateLogs, foldEntries } from '../steps/state-log.ts';
import { readInput, writeInput } from '../records/input-format.ts';
import { type OutputType, readOutput } from '../records/output-format.ts';
import { type StoreScripts, storeScripts } from '../scripts.ts';
import { WaitingStore } from '../calls/waiting/waiting-store.ts';
import { PartitionMap } from '../redis/partition-map.ts';
import { partitionOf, partitionOfKey, partitionTag } from '../redis/partitions.ts';
import { WatchdogStore } from '../watchdog/watchdog-store.ts';
import { type ChildLineage, ChildStore, wholeCount } from '../calls/waiting/child-store.ts';
import { WorkflowStore } from '../workflows/workflow-store.ts';
import { type StreamPart, StreamStore } from '../streams/stream-store.ts';

/** An event to append, with an optional dedupe id: an event with an id is written at most once. */
export interface PendingEvent {
  readonly event: EventDraft;
  readonly once?: string;
}

/** What a run was enqueued with, as the workers read it back. */
export interface RunSpec {
  readonly run_id: string;
  readonly status: RunStatus;
  readonly agent: string;
  /** A string, or a list of messages (SPEC §11). */
  readonly input: RunInput;
  readonly config: unknown;
  readonly exec_config: unknown;
  /**
   * The run's trace: its root span (`traceparent`), the span enqueue was called in (`request`) and,
   * for a child run, the span of its parent's call that its root span is a child of (`parent`).
   */
  readonly trace: { readonly traceparent?: string; readonly request?: string; readonly parent?: string };
  /** The agent's definition hash in the registry when the run was enqueued ('' if unknown). */
  readonly definition_hash: string;
  /** Whether the run was asked to stream (SPEC §12), or not to; absent: as its agent says. */
  readonly stream?: boolean;
}

/** A call's recorded result, and how many calls of its round are still open (0: the round is settled). */
export interface RecordedResult {
  readonly content: string;
  readonly openInRound: number;
  /** This write recorded it (not an earlier one). */
  readonly recordedNow: boolean;
}

/** Whether a tool job should run its call: yes, no (recorded already), or no (the run has ended). */
export type CallStart = { readonly status: 'run' | 'ended' } | { readonly status: 'recorded'; readonly openInRound: number };

/** How a run ends. */
export type RunOutcome =
  /** `output_type`: what the output text is, when not plain text (see `output-format.ts`). */
  { status: 'completed'; output: string; output_type?: OutputType } | { status: 'failed'; error: RunError; output?: string } | { status: 'cancelled'; output?: string };

/** A run's end as the store writes it: the outcome, the step it ends in, and that step's last events (if any). */
export interface RunEnding {
  readonly outcome: RunOutcome;
  readonly step_id: string;
  readonly events?: readonly PendingEvent[];
  /**
   * How calls still open are closed: with this content for the model and a `ToolCallFailed` of
   * this code. A cancel closes them as `cancelled` unless told otherwise; other endings leave
   * them unless they say (a run failed because it stalled closes them as `worker_lost`).
   */
  readonly closing?: { readonly content: string; readonly code: string };
  /** A workflow run's steps still open: running ones end as `running`, those not started are skipped with `skip_reason`. */
  readonly steps?: { readonly running: 'cancelled' | 'failed'; readonly skip_reason: SkipReason };
}

/** A workflow run's steps as created: each in graph order with its first status, and the roots' `StepStarted`. */
export interface InitialSteps {
  readonly statuses: readonly (readonly [string, 'pending' | 'running'])[];
  readonly started: readonly EventDraft[];
}

/** An event with the time it happened, for an event written some time after (its `ts`). */
export interface TimedEvent {
  readonly event: EventDraft;
  readonly ts: number;
}

/** A call's result as a tool job or the join records it. */
export interface ToolResult {
  readonly content: string;
  readonly terminal: EventDraft;
  /** The traceparent of the call's `execute_tool` span, for the join's links (when traced). */
  readonly spanTraceparent?: string;
  /** The attempt's `ToolCallStarted`, when it was not written before the handler ran. */
  readonly started?: TimedEvent;
  /** A completed call's run-state changes (SPEC §17), recorded with its result. */
  readonly changes?: readonly StateChange[];
  /** A child run's call (SPEC §13): what the child and its own children spent, added to the run's for its budget. */
  readonly spend?: RunSpent;
}

/** Whether a `finishRun` ended the run, and the calls its cancel closed. */
export interface RunEnded {
  readonly ended: boolean;
  readonly closed: readonly RoundCall[];
  /** Set when this call ended the run: what its metrics name it by (SPEC §18). */
  readonly facts?: EndedRunFacts;
}

/**
 * What a run's metrics name it by, read by the script that ended it: its agent (or workflow) and
 * when it was enqueued (ms); and its parent, for a child run, whose call its end settles (SPEC §13).
 */
export interface EndedRunFacts {
  readonly agent: string;
  readonly workflow?: string;
  readonly created_at: number;
  readonly parent_run_id?: string;
}

/** The scripts' `{created_at, agent, workflow, parent_run_id}` (see finish.lua's runFacts). */
export function endedRunFacts(raw: unknown): EndedRunFacts | undefined {
  if (!Array.isArray(raw)) return undefined;
  const [created_at, agent, workflow, parent_run_id] = raw as (string | null)[];
  if (!agent || !created_at) return undefined;
  return { agent, ...(workflow ? { workflow } : {}), created_at: Number(created_at), ...(parent_run_id ? { parent_run_id } : {}) };
}

/** A call of a round, as the store records it. */
export interface RoundCall {
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly tool_name: string;
  /** The definition hash of the tool the call was planned with (absent for a call no handler runs): names its job's queue. */
  readonly definition_hash?: string | undefined;
  /** Fanned out to a tool job, so counted among its round's open calls until its result is recorded. */
  readonly fanned_out: boolean;
  /** Calls of its round wait for approval (only then may its result leave the run waiting). */
  readonly round_waits?: boolean;
}

/**
 * The durable run store in Redis: the run record, each step's state, memoized provider
 * responses, recorded tool results and the event log. Every write that must happen once is one
 * Lua script (see `scripts.ts`).
 */
export class RunStore {
  readonly keys: Keys;
  /** A workflow run's steps. */
  readonly workflows: WorkflowStore;
  /** Calls waiting for a person's approval (SPEC §10). */
  readonly approvals: WaitingStore<ApprovalResolution>;
  /** Calls waiting for a result from outside (SPEC §20). */
  readonly toolResults: WaitingStore<ToolResultAnswer>;
  /** How many partitions runs spread over (SPEC §9). */
  readonly partitions: PartitionMap;
  /** What the watchdog reads of runs that have gone quiet. */
  readonly watchdog: WatchdogStore;
  /** The runs' streams of text (SPEC §12). */
  readonly streams: StreamStore;
  /** Child runs' ties to their parents' calls (SPEC §13). */
  readonly children: ChildStore;
  private readonly scripts: StoreScripts;
  /** The steps' messages: a read asks Redis only for what this worker lacks. */
  private readonly transcripts: Transcripts;
  /** The runs' states (SPEC §17), as lists of recorded changes. */
  readonly stateLogs: StateLogs;
  /** Providers paused by a 429 (SPEC §16). */
  readonly pauses: ProviderPauses;

  constructor(
    private readonly redis: Redis,
    readonly prefix: string,
    readonly retentionSeconds: number,
  ) {
    this.keys = keysFor(prefix);
    this.scripts = storeScripts(redis);
    this.stateLogs = new StateLogs(redis, this.keys);
    this.workflows = new WorkflowStore(redis, this.keys, this.scripts, this, this.stateLogs);
    this.approvals = new WaitingStore('approval', redis, this.keys, this.scripts, this);
    this.toolResults = new WaitingStore('result', redis, this.keys, this.scripts, this);
    this.partitions = new PartitionMap(redis, this.keys, prefix);
    this.watchdog = new WatchdogStore(redis, this.keys, this);
    this.transcripts = new Transcripts(redis, this.keys);
    this.streams = new StreamStore(redis, this.keys, this.scripts);
    this.children = new ChildStore(redis, this.keys, this.scripts);
    this.pauses = new ProviderPauses(redis, this.keys, this.scripts);
  }

  private runKeys(run_id: string): RunKeys {
    return this.keys.run(run_id);
  }

  /**
   * Creates a run with its `RunEnqueued` event; with an idempotency key already seen, returns that
   * run's id. A child run (SPEC §13) is created with its `lineage`.
   */
  async createRun(
    spec: Omit<RunSpec, 'status'> & { readonly lineage?: ChildLineage },
    idempotency_key: string | undefined,
    enqueued: EventDraft,
    steps?: InitialSteps,
    state?: RunState,
    request_hash?: string,
  ): Promise<{ created: boolean; run_id: string }> {
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
    };
    const [created, run_id] = (await this.scripts.createRun([this.keys.record(spec.run_id), this.keys.idempotency(idempotency_key ?? spec.run_id, this.keys.tagOf(spec.run_id))], {
      run_id: spec.run_id,
      use_idempotency: idempotency_key !== undefined,
      fields,
      enqueued: this.eventJson(enqueued, now),
      ...(steps ? { steps: steps.statuses, started: this.pairs(steps.started.map((event) => ({ event }))) } : {}),
      ...(state && Object.keys(state).length > 0 ? { state_entry: JSON.stringify(stateAsChanges(state)), state_step: steps ? RUN_STEP_ID : 's1' } : {}),
    })) as [number, string];
    return { created: created === 1, run_id };
  }

  /** True for the first caller only: that process emits the run's root span. Expires with the run. */
  async claimRootSpan(run_id: string): Promise<boolean> {
    return (await this.redis.set(this.runKeys(run_id).rootSpan, '1', 'EX', this.retentionSeconds, 'NX')) === 'OK';
  }

  async getSpec(run_id: string): Promise<RunSpec | undefined> {
    const fields = await this.redis.hmget(this.keys.record(run_id), ...SPEC_FIELDS, 'stream');
    return specFrom(run_id, fields, fields[SPEC_FIELDS.length] ?? null);
  }

  /** The request hash stored with a run enqueued with an idempotency key (see `idempotentRequestHash`). */
  async requestHash(run_id: string): Promise<string | undefined> {
    return (await this.redis.hget(this.keys.record(run_id), 'request_hash')) ?? undefined;
  }

  async status(run_id: string): Promise<RunStatus | undefined> {
    return ((await this.redis.hget(this.keys.record(run_id), 'status')) ?? undefined) as RunStatus | undefined;
  }

  /** The run record as clients see it. */
  async getRun(run_id: string): Promise<RunRecord | undefined> {
    const record = await this.redis.hgetall(this.keys.record(run_id));
    if (!record.status) return undefined;
    const steps = record.workflow ? await this.workflows.stepRecords(run_id) : undefined;
    const open = record.status === 'waiting' || record.status === 'running';
    const [pending_approvals, pending_tool_results] = open ? await Promise.all([this.approvals.pending(run_id), this.toolResults.pending(run_id)]) : [[], []];
    const state = await this.runState(run_id, record.workflow ? RUN_STEP_ID : 's1');
    return {
      run_id,
      status: record.status as RunStatus,
      agent: record.agent ?? '',
      ...(record.workflow ? { workflow: record.workflow, steps } : {}),
      ...readOutput(record.output, record.output_type),
      ...(record.error ? { error: JSON.parse(record.error) as RunError } : {}),
      usage: { input: Number(record.usage_input ?? 0), output: Number(record.usage_output ?? 0), total: Number(record.usage_total ?? 0) },
      iterations: Number(record.iterations ?? 0),
      created_at: Number(record.created_at),
      ...(record.finished_at ? { finished_at: Number(record.finished_at) } : {}),
      partition: partitionOf(run_id) ?? 0,
      ...traceIdOf(record.trace),
      ...(record.parent_run_id ? { parent_run_id: record.parent_run_id, parent_tool_call_id: record.parent_tool_call_id ?? '' } : {}),
      ...(record.thread_id ? { thread_id: record.thread_id } : {}),
      ...(record.steered_into ? { steered_into: record.steered_into } : {}),
      ...steeredFrom(record.steered_from),
      ...(pending_approvals.length > 0 ? { pending_approvals } : {}),
      ...(pending_tool_results.length > 0 ? { pending_tool_results } : {}),
      ...(state ? { state } : {}),
    };
  }

  /**
   * A run's state as its last round left it (SPEC §17): every entry of its state log applied; `{}`
   * for none. Undefined when the log cannot be read (another process wrote it): the record goes
   * on without it.
   */
  private async runState(run_id: string, step_id: string): Promise<RunState | undefined> {
    const lines = await this.redis.lrange(this.runKeys(run_id).stateLog(step_id), 0, -1);
    try {
      return foldEntries({}, lines, 0, `state log of ${run_id}/${step_id}`);
    } catch {
      return undefined;
    }
  }

  /**
   * Runs newest first (by creation time, then id), from the listing index: every run, or one
   * agent's; with `status`, only those in it. `cursor` continues a listing after the run it names.
   * Index entries whose record retention has removed are dropped as they are met.
   */
  async listRuns(query: RunListQuery): Promise<{ runs: RunRecord[]; next_cursor?: string }> {
    // Every partition's index, merged: the listing reads as one.
    const indexes = (await this.tags()).map((tag) => this.keys.runsIndexIn(tag, query.agent));
    await Promise.all(indexes.map((index) => this.trimRunIndex(index)));
    let after = query.cursor;
    const runs: RunRecord[] = [];
    // Reads a page more than asked for at a time, so a status filter rarely needs a second read.
    for (let reads = 0; runs.length < query.limit && reads < 20; reads += 1) {
      const count = Math.max(query.limit * 2, 50);
      const pages = await Promise.all(indexes.map(async (index) => (await this.indexPage(index, after, count)).map((entry) => ({ ...entry, index }))));
      const page = pages
        .flat()
        .sort((a, b) => b.score - a.score || (a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0))
        .slice(0, count);
      if (page.length === 0) return { runs };
      const records = await Promise.all(page.map(({ run_id }) => this.getRun(run_id)));
      for (const [position, entry] of page.entries()) {
        const record = records[position];
        after = `${entry.score}:${entry.run_id}`;
        if (!record) {
          await this.redis.zrem(entry.index, entry.run_id);
          continue;
        }
        if (query.status !== undefined && record.status !== query.status) continue;
        runs.push(record);
        if (runs.length === query.limit) return { runs, next_cursor: after };
      }
    }
    return after === undefined || runs.length === 0 ? { runs } : { runs, next_cursor: after };
  }

  /**
   * Drops listing-index entries of runs created longer ago than the retention period and a day
   * (their records have expired, or will have once they end): the global index and each agent's.
   */
  async trimRunIndexes(agents: readonly string[]): Promise<void> {
    const indexes = (await this.tags()).flatMap((tag) => [this.keys.runsIndexIn(tag), ...agents.map((agent) => this.keys.runsIndexIn(tag, agent))]);
    await Promise.all(indexes.map((index) => this.trimRunIndex(index)));
  }

  /**
   * The run an idempotency key was first used for, wherever the partition count then put it: the
   * prefix's own tag, or the key's partition under each count the map has had.
   */
  async findIdempotent(key: string): Promise<string | undefined> {
    const { history } = await this.partitions.read();
    const tags = new Set([this.keys.tag, ...history.map((count) => partitionTag(this.prefix, partitionOfKey(key, count)))]);
    const found = await Promise.all([...tags].map((tag) => this.redis.get(this.keys.idempotency(key, tag))));
    return found.find((run_id) => run_id !== null) ?? undefined;
  }

  /** Every tag a run may live under (the prefix's own, and each partition's). */
  async tags(): Promise<string[]> {
    return this.partitions.tagsOf(await this.partitions.read());
  }

  private trimRunIndex(index: string): Promise<number> {
    return this.redis.zremrangebyscore(index, '-inf', Date.now() - this.retentionSeconds * 1000 - 86_400_000);
  }

  /** Index entries after `cursor` (`<created_at>:<run_id>`), newest first. */
  private async indexPage(index: string, cursor: string | undefined, count: number): Promise<{ run_id: string; score: number }[]> {
    const [score, member] = cursor === undefined ? ['+inf', undefined] : [cursor.slice(0, cursor.indexOf(':')), cursor.slice(cursor.indexOf(':') + 1)];
    // Entries with the cursor's own score come back too; those at or before the cursor are skipped.
    const flat = await this.redis.zrevrangebyscore(index, score, '-inf', 'WITHSCORES', 'LIMIT', 0, count + 64);
    const entries: { run_id: string; score: number }[] = [];
    for (let at = 0; at + 1 < flat.length; at += 2) {
      const entry = { run_id: flat[at]!, score: Number(flat[at + 1]) };
      if (member !== undefined && String(entry.score) === score && entry.run_id >= member) continue;
      entries.push(entry);
    }
    return entries.slice(0, count);
  }

  /** Appends events unless the run has ended. */
  async append(run_id: string, events: readonly PendingEvent[]): Promise<boolean> {
    const result = await this.scripts.appendEvents([this.keys.record(run_id)], { events: this.pairs(events) });
    return result === 1;
  }

  /**
   * Moves provider call `iteration` of a step to `position`, with the failed try's events, in one
   * step. False when the run has ended.
   */
  async moveCall(run_id: string, place: CallPlace, position: TryPosition, events: readonly PendingEvent[]): Promise<boolean> {
    const { step_id, iteration } = place;
    const written = await this.scripts.moveCall([this.keys.record(run_id)], { step_id, iteration, position: writeTryPosition(position), events: this.pairs(events) });
    return written === 1;
  }

  /** Events from index `from` (0-based) on. */
  async events(run_id: string, from = 0): Promise<TraceEvent[]> {
    const lines = await this.redis.lrange(this.runKeys(run_id).events, from, -1);
    // An event's seq is its place in the log, which only grows; its run is the log's.
    return lines.map((line, index) => {
      const { kind, run_id: _stored, ...fields } = JSON.parse(line) as Record<string, unknown>;
      return { seq: from + index + 1, kind, run_id, ...fields } as unknown as TraceEvent;
    });
  }

  /**
   * A step's state with all its messages (read from its transcript list after those this worker
   * has cached), or undefined when the step has none yet.
   */
  async loadState(run_id: string, step_id: string): Promise<StepState | undefined> {
    const keys = this.runKeys(run_id);
    const json = await this.redis.hget(keys.state(step_id), 'json');
    if (!json) return undefined;
    const stored = readState(json, `state of ${run_id}/${step_id}`);
    if (stored.kind === 'inline') return stored.state;
    const thread = stored.state.earlier ? await this.redis.hmget(keys.record, 'thread_id', 'thread_origin', 'thread_base') : [];
    return this.transcripts.load(run_id, step_id, stored, threadPlace(thread[0] ?? null, thread[1] ?? null, thread[2] ?? null));
  }

  /** A step's own conversation (`client.messages`): its messages but the thread's it began on; empty when it has no state yet. */
  async stepConversation(run_id: string, step_id: string): Promise<ChatMessage[]> {
    const json = await this.redis.hget(this.runKeys(run_id).state(step_id), 'json');
    return json ? this.transcripts.conversation(run_id, step_id, readState(json, `state of ${run_id}/${step_id}`)) : [];
  }

  /** The first messages of the thread a run began on (SPEC §11), read once per worker. */
  threadMessages(run_id: string, thread: ThreadPlace): Promise<ChatMessage[]> {
    return this.transcripts.threadMessages(run_id, thread);
  }

  /**
   * Saves a step's state if it is still at `expectedIterations` (-1: no state yet), appending
   * `events` in the same step. Its messages go to the step's transcript list, which receives only
   * those it does not hold yet (the ones after this worker's cached transcript of the step).
   * `saved` is false when another delivery got there first.
   */
  async saveState(
    run_id: string,
    state: StepState,
    expectedIterations: number,
    events: readonly PendingEvent[] = [],
    markRunning = false,
    stateEntry?: StateEntry,
  ): Promise<'saved' | 'stale' | 'ended'> {
    const { count, from, added } = this.transcripts.toSave(run_id, state, expectedIterations === -1);
    const outcome = await this.scripts.saveState([this.keys.record(run_id)], {
      step_id: state.step_id,
      expected: expectedIterations,
      iterations: state.iterations,
      json: writeState(state),
      count,
      from,
      messages: added,
      mark_running: markRunning,
      events: this.pairs(events),
      ...(stateEntry ? { state_entry: JSON.stringify(stateEntry.changes), state_at: stateEntry.at } : {}),
    });
    if (outcome === 1) this.transcripts.saved(run_id, state, added);
    if (outcome === 1 && stateEntry) this.stateLogs.remember(run_id, state.step_id, stateEntry.at + 1, stateEntry);
    return outcome === 1 ? 'saved' : outcome === 0 ? 'stale' : 'ended';
  }

  /**
   * Records a provider response with its events, once, opening the round of `open` calls (the
   * tool jobs it will fan out) in the same step; with `end`, a response that ends the run ends it
   * in that step too. Returns the response that stands and whether this call recorded it (else an
   * earlier delivery's response stands and nothing was opened or ended), or `undefined` when
   * the run has ended. `stream`: the response's part of the run's stream, written with it.
   */
  async recordResponse(
    run_id: string,
    step_id: string,
    iteration: number,
    recorded: RecordedResponse,
    events: readonly PendingEvent[],
    open: readonly RoundCall[] = [],
    end?: RunEnding,
    executing = 0,
    stream?: StreamPart,
  ): Promise<{ recorded: RecordedResponse; recordedNow: boolean; ended?: EndedRunFacts } | undefined> {
    const { response } = recorded;
    const [outcome, stored, facts] = (await this.scripts.recordResponse([this.keys.record(run_id)], {
      step_id,
      iteration,
      response: writeResponse(recorded),
      usage: response.usage,
      has_calls: response.tool_calls.length > 0,
      events: this.pairs(events),
      open_count: open.length,
      open_calls: open.length > 0 ? JSON.stringify(open.map((call) => [call.tool_call_id, call.tool_name, call.definition_hash ?? ''])) : '',
      tool_calls: executing,
      ending: end ? this.ending(end) : undefined,
      stream,
    })) as [number, string?, unknown?];
    if (outcome === -1) return undefined;
    if (outcome === 0 && stored) return { recorded: readResponse(stored, `response ${iteration} of ${run_id}/${step_id}`), recordedNow: false };
    const ended = endedRunFacts(facts);
    return { recorded, recordedNow: true, ...(ended ? { ended } : {}) };
  }

  /**
   * Records a call's result and its terminal event, once, closing the call if it was fanned out;
   * a `started` event not written yet goes in the same step, just before the terminal one.
   * Returns the content that stands and how many calls of its round are still open, or
   * `undefined` when the run ended before anything was recorded.
   */
  async recordToolResult(run_id: string, call: RoundCall, result: ToolResult): Promise<RecordedResult | undefined> {
    const recorded = await this.recordToolResultWithin(run_id, call, result, 0);
    if (recorded && 'unseen' in recorded) throw new Error(`call ${call.tool_call_id} has state changes: record it with recordToolResultWithin`);
    return recorded;
  }

  /**
   * {@link recordToolResult} for a call with run-state changes (SPEC §17), checked to fit with the
   * `seen` calls' changes found recorded in its round: when others are recorded now, nothing is
   * written and they are returned (`unseen`: their changes by call id), for the check to be made again.
   */
  async recordToolResultWithin(
    run_id: string,
    call: RoundCall,
    result: ToolResult,
    seen: number,
  ): Promise<RecordedResult | { readonly unseen: Readonly<Record<string, string>> } | undefined> {
    const [outcome, stored, openInRound] = (await this.scripts.recordToolResult(
      [this.keys.record(run_id)],
      [
        call.step_id,
        call.iteration,
        call.tool_call_id,
        result.content,
        call.fanned_out ? '1' : '0',
        this.eventJson(result.terminal),
        result.spanTraceparent ?? '',
        result.started ? this.eventJson(result.started.event, result.started.ts) : '',
        failureCode(result.terminal),
        call.round_waits ? '1' : '0',
        result.changes && result.changes.length > 0 ? JSON.stringify(result.changes) : '',
        result.spend ? `${wholeCount(result.spend.tokens)} ${wholeCount(result.spend.tool_calls)}` : '',
        String(seen),
      ],
    )) as [number, (string | string[])?, number?];
    if (outcome === -1) return undefined;
    if (outcome === -2) return { unseen: pairsToRecord(stored as string[]) };
    return { content: outcome === 0 ? (stored as string) : result.content, openInRound: openInRound ?? 0, recordedNow: outcome === 1 };
  }

  /**
   * Writes the call's `ToolCallStarted` (once per `once` id; '' for none) unless its result is already
   * recorded (then: how many calls of its round are still open) or the run has ended. One round trip.
   */
  async startToolCall(run_id: string, call: RoundCall, started: TimedEvent, once: string): Promise<CallStart> {
    const [outcome, openInRound] = (await this.scripts.startToolCall(
      [this.keys.record(run_id)],
      [call.step_id, call.iteration, call.tool_call_id, once, this.eventJson(started.event, started.ts)],
    )) as [number, number?];
    if (outcome === 1) return { status: 'run' };
    return outcome === 0 ? { status: 'recorded', openInRound: openInRound ?? 0 } : { status: 'ended' };
  }

  /**
   * Everything a provider job for call `iteration` reads, in one script (one round trip, one
   * consistent view): the run, the step's state, the responses to calls `iteration - 1` and
   * `iteration`, and the results and tool spans of round `iteration - 1`.
   */
  async loadStep(run_id: string, step_id: string, iteration: number): Promise<StepSnapshot> {
    const [fields, json, previousResponse, response, results, spans, from, tail, changes, stateEntries, position] = (await this.scripts.loadStep(
      [this.keys.record(run_id)],
      [step_id, iteration, this.transcripts.cachedCount(run_id, step_id)],
    )) as [(string | null)[], string | null, string | null, string | null, string[], string[], number, string[], string[], number, string | null];
    const previousResults = pairsToRecord(results);
    const previousSpans = pairsToRecord(spans);
    const where = `${run_id}/${step_id}`;
    const stored = json === null ? undefined : readState(json, `state of ${where}`);
    const thread = threadPlace(fields[10] ?? null, fields[11] ?? null, fields[12] ?? null);
    const state = stored === undefined ? undefined : stored.kind === 'inline' ? stored.state : await this.transcripts.withMessages(run_id, step_id, stored, from, tail, thread);
    return {
      spec: specFrom(run_id, fields, fields[16] ?? null),
      // The run's own spend and its child runs' (SPEC §13): one budget.
      spent: { tokens: wholeCount(fields[8]) + wholeCount(fields[13]), tool_calls: wholeCount(fields[9]) + wholeCount(fields[14]) },
      ...(fields[15] ? { parent_run_id: fields[15] } : {}),
      state,
      previousResponse: previousResponse === null ? undefined : readResponse(previousResponse, `response ${iteration - 1} of ${where}`),
      response: response === null ? undefined : readResponse(response, `response ${iteration} of ${where}`),
      previousResults,
      previousSpans,
      previousChanges: pairsToRecord(changes),
      stateEntries,
      position: position === null ? FIRST_TRY : readTryPosition(position, `the try position of call ${iteration} of ${where}`),
    };
  }

  /**
   * The ids of the tool calls each given response asked for, in the model's order (undefined
   * where no response is recorded). One command for all of them.
   */
  async toolCallIds(run_id: string, responses: readonly CallPlace[]): Promise<(string[] | undefined)[]> {
    if (responses.length === 0) return [];
    const keys = this.runKeys(run_id);
    const stored = await this.redis.mget(...responses.map(({ step_id, iteration }) => keys.response(step_id, iteration)));
    return stored.map((json) => (json === null ? undefined : readResponse(json, `a response of ${run_id}`).response.tool_calls.map((call) => call.id)));
  }

  /**
   * Ends the run once (completed, failed or cancelled): `ended` is false if it had already ended.
   * `closed`: the open calls a cancel closed, whose tool jobs have no call to run any more.
   */
  async finishRun(run_id: string, ending: RunEnding): Promise<RunEnded> {
    const [finished, closed = [], facts] = (await this.scripts.finishRun([this.keys.record(run_id)], this.ending(ending))) as [number, string[]?, unknown?];
    const ended = endedRunFacts(facts);
    return {
      ended: finished === 1,
      closed: closed.map((json) => ({ ...(JSON.parse(json) as Omit<RoundCall, 'fanned_out'>), fanned_out: true })),
      ...(ended ? { facts: ended } : {}),
    };
  }

  /** A run's ending as the scripts' `finish` reads it (redis/lua/finish.lua). */
  private ending(ending: RunEnding): Record<string, unknown> {
    const { outcome, step_id, events = [] } = ending;
    return {
      status: outcome.status,
      step_id,
      ts: Date.now(),
      output: outcome.output,
      output_type: outcome.status === 'completed' ? outcome.output_type : undefined,
      error: outcome.status === 'failed' ? JSON.stringify(outcome.error) : undefined,
      error_code: outcome.status === 'failed' ? outcome.error.error_code : undefined,
      closing: ending.closing ?? (outcome.status === 'cancelled' ? CANCEL_CLOSING : undefined),
      retention_seconds: this.retentionSeconds,
      events: this.pairs(events),
      steps: ending.steps,
    };
  }

  /** Events as the scripts take them: `{dedupeId, json}` pairs. */
  pairs(events: readonly PendingEvent[]): [string, string][] {
    return events.map(({ event, once }) => [once ?? '', this.eventJson(event)]);
  }

  /**
   * The event as stored: policy applied and time set, without `seq` (its place in the log) or
   * `run_id` (the log's run), which `events` adds back. Every byte here is sent, parsed and kept
   * for each of a run's events.
   */
  eventJson(event: EventDraft, ts = Date.now()): string {
    const stored: Record<string, unknown> = applyTracePolicy(event);
    stored.ts = ts;
    return JSON.stringify(stored);
  }
}

/** A terminal event's failure code, kept beside the call's result (a tool step's outcome); '' when it completed. */
function failureCode(terminal: EventDraft): string {
  switch (terminal.kind) {
    case 'ToolCallCompleted':
      return '';
    case 'ToolCallFailed':
      return terminal.error_code;
    case 'LoopDetected':
      return 'loop_detected';
    default:
      return 'invalid_arguments';
  }
}

export const CANCEL_CLOSING = Object.freeze({ content: ToolResultText.cancelled(), code: 'cancelled' });

/** What to list (see {@link RunStore.listRuns}). */
export interface RunListQuery {
  readonly status?: RunStatus;
  readonly agent?: string;
  readonly limit: number;
  readonly cursor?: string;
}

/** What a provider job reads before it decides (see {@link RunStore.loadStep}). */
export interface StepSnapshot {
  readonly spec: RunSpec | undefined;
  /** What the whole run has spent so far (tokens, executed tool calls), for its budget. */
  readonly spent: RunSpent;
  readonly state: StepState | undefined;
  readonly previousResponse: RecordedResponse | undefined;
  readonly response: RecordedResponse | undefined;
  readonly previousResults: Readonly<Record<string, string>>;
  /** traceparents of round `iteration - 1`'s `execute_tool` spans. */
  readonly previousSpans: Readonly<Record<string, string>>;
  /** Round `iteration - 1`'s run-state changes (SPEC §17): a JSON list per completed call that made any. */
  readonly previousChanges: Readonly<Record<string, string>>;
  /** How many entries the step's state log holds (its initial state, then each round that changed it). */
  readonly stateEntries: number;
  /** A child run's parent (SPEC §13): a child whose parent has ended is cancelled. */
  readonly parent_run_id?: string;
  /** Where call `iteration` stands among its models: moved only by its failed provider calls (SPEC §16). */
  readonly position: TryPosition;
}

/** A round's run-state changes, saved with the state that folds them in: the state log's entry `at` (0-based), and the state after it. */
export interface StateEntry {
  readonly at: number;
  readonly changes: readonly StateChange[];
  readonly state: RunState;
  /** The size of `state`'s JSON. */
  readonly size: number;
}

/** The trace id of a run's stored trace (`{traceparent}`), as a record field. */
function traceIdOf(trace: string | undefined): { trace_id?: string } {
  const match = /"traceparent":"00-([0-9a-f]{32})-/.exec(trace ?? '');
  return match ? { trace_id: match[1]! } : {};
}

/** A Lua script's flat `field, value, …` reply as a record. */
function pairsToRecord(flat: readonly string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let index = 0; index + 1 < flat.length; index += 2) record[flat[index]!] = flat[index + 1]!;
  return record;
}

/** The record fields a run's spec is read from, in order (`loadStep.lua` reads the same). */
const SPEC_FIELDS = ['status', 'agent', 'input', 'config', 'exec_config', 'trace', 'definition_hash', 'input_kind'] as const;

/** Where a run's thread conversation is, from its record's fields; undefined for a run on no thread (or one that began on none). */
function threadPlace(thread_id: string | null, origin: string | null, base: string | null): ThreadPlace | undefined {
  const count = Number(base);
  return thread_id != null && origin != null && Number.isSafeInteger(count) && count > 0 ? { thread_id, origin, count } : undefined;
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

function specFrom(run_id: string, fields: (string | null)[], stream: string | null): RunSpec | undefined {
  const [status, agent, input, config, exec_config, trace, definition_hash, input_kind] = fields;
  if (!status || agent == null || input == null) return undefined;
  return {
    run_id,
    status: status as RunStatus,
    agent,
    input: readInput(input, input_kind, `input of run ${run_id}`),
    config: JSON.parse(config ?? 'null'),
    exec_config: JSON.parse(exec_config ?? 'null'),
    trace: JSON.parse(trace ?? '{}'),
    definition_hash: definition_hash ?? '',
    ...(stream === '1' || stream === '0' ? { stream: stream === '1' } : {}),
  };
}
