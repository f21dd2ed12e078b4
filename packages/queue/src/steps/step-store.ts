import {
  type CallPlace,
  type ChatMessage,
  FIRST_TRY,
  type RunSpent,
  type RunState,
  type RunStatus,
  type StateChange,
  type StepState,
  TERMINAL_STATUSES,
  type TryPosition,
} from '@arcflow/core';
import { spentOf, wholeCount } from '../calls/waiting/child-store.ts';
import type { PendingEvent } from '../records/event-codec.ts';
import { readArchive } from '../records/archive.ts';
import { type RecordedResponse, StoredFormatError, readResponse, readState, readTryPosition, writeResponse, writeState } from '../records/formats.ts';
import type { RoundCall } from '../records/round-call.ts';
import { pairsToRecord } from '../records/round-call.ts';
import { type RunSpec, specFrom } from '../records/run-spec.ts';
import { type EndedRunFacts, type RunEnding, endedRunFacts, endingArgument } from '../runs/ending.ts';
import { RUN_KEY_SUFFIX, roundKey, stateKey, stateLogKey, transcriptKey } from '../redis/keys.ts';
import type { StoreContext } from '../store-context.ts';
import type { StreamPart } from '../streams/stream-store.ts';
import type { StateLogs } from './state-log.ts';
import type { ThreadPlace, Transcripts } from './transcripts.ts';

/** What a provider job reads before it decides (see {@link StepStore.loadStep}). */
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
  /** Whether the run was enqueued on a thread (SPEC §11; its record's `thread_id`, set once at enqueue). */
  readonly onThread: boolean;
  /** Where call `iteration` stands among its models: moved only by its failed provider calls (SPEC §16). */
  readonly position: TryPosition;
  /** How many of the step's first rounds a fork copied from its source run (SPEC §15): they are replayed, never called or executed. */
  readonly copiedRounds: number;
}

/** One round of a step as recorded: its response (with the plan decided on it), its calls' results and their run-state changes. */
export interface RecordedRound {
  readonly iteration: number;
  readonly recorded: RecordedResponse;
  /** `tool_call_id` → result (and `<tool_call_id>|error` → the failure's code), as `recordToolResult` keeps them. */
  readonly results: Readonly<Record<string, string>>;
  /** `tool_call_id` → the completed call's run-state changes (a JSON list). */
  readonly changes: Readonly<Record<string, string>>;
}

/** A round's run-state changes, saved with the state that folds them in: the state log's entry `at` (0-based), and the state after it. */
export interface StateEntry {
  readonly at: number;
  readonly changes: readonly StateChange[];
  readonly state: RunState;
  /** The size of `state`'s JSON. */
  readonly size: number;
}

/**
 * A step's loop in Redis: its state (messages in a transcript list, read only where this worker
 * lacks them), the provider responses recorded once each, and the read a provider job starts with.
 */
export class StepStore {
  constructor(
    private readonly context: StoreContext,
    /** The steps' messages: a read asks Redis only for what this worker lacks. */
    private readonly transcripts: Transcripts,
    /** The runs' states (SPEC §17), as lists of recorded changes. */
    readonly stateLogs: StateLogs,
  ) {}

  /**
   * Everything a provider job for call `iteration` reads, in one script (one round trip, one
   * consistent view): the run, the step's state, the responses to calls `iteration - 1` and
   * `iteration`, and the results and tool spans of round `iteration - 1`.
   */
  async loadStep(run_id: string, step_id: string, iteration: number): Promise<StepSnapshot> {
    const cached = this.transcripts.cachedCount(run_id, step_id);
    let read = (await this.context.scripts.loadStep([this.context.keys.record(run_id)], [step_id, iteration, cached])) as LoadStepReply;
    // An ended run with no state of this step may be compacted: the same read, from its archive.
    if (read[1] === null && TERMINAL_STATUSES.has(read[0][0] as RunStatus)) read = (await this.archivedStep(run_id, step_id, iteration, cached, read)) ?? read;
    const [fields, json, previousResponse, response, results, spans, from, tail, changes, stateEntries, position, copied] = read;
    const previousResults = pairsToRecord(results);
    const previousSpans = pairsToRecord(spans);
    const where = `${run_id}/${step_id}`;
    const stored = json === null ? undefined : readState(json, `state of ${where}`);
    const thread = threadPlace(fields[10] ?? null, fields[11] ?? null, fields[12] ?? null);
    const state = stored === undefined ? undefined : stored.kind === 'inline' ? stored.state : await this.transcripts.withMessages(run_id, step_id, stored, from, tail, thread);
    return {
      spec: specFrom(run_id, fields, fields[16] ?? null),
      // The run's own spend and its child runs' (SPEC §13): one budget.
      spent: spentOf(fields[8], fields[9], fields[13], fields[14], fields[17], fields[18]),
      ...(fields[15] ? { parent_run_id: fields[15] } : {}),
      onThread: fields[10] != null,
      state,
      previousResponse: previousResponse === null ? undefined : readResponse(previousResponse, `response ${iteration - 1} of ${where}`),
      response: response === null ? undefined : readResponse(response, `response ${iteration} of ${where}`),
      previousResults,
      previousSpans,
      previousChanges: pairsToRecord(changes),
      stateEntries,
      position: position === null ? FIRST_TRY : readTryPosition(position, `the try position of call ${iteration} of ${where}`),
      copiedRounds: wholeCount(copied ?? undefined),
    };
  }

  /** What loadStep.lua reads, from a compacted run's archive (undefined when the run has none). */
  private async archivedStep(run_id: string, step_id: string, n: number, cached: number, live: LoadStepReply): Promise<LoadStepReply | undefined> {
    const archived = await readArchive(this.context.redis, this.context.keys, run_id);
    if (!archived) return undefined;
    const round = (kind: 'response' | 'results' | 'spans' | 'changes', iteration: number) => roundKey('', step_id, kind, iteration);
    const previous = n > 1;
    const transcript = archived.list(transcriptKey('', step_id));
    const from = cached > 0 && transcript.length < cached ? 0 : cached;
    return [
      live[0],
      archived.hash(stateKey('', step_id)).json ?? null,
      previous ? archived.string(round('response', n - 1)) : null,
      archived.string(round('response', n)),
      previous ? [...archived.hashEntries(round('results', n - 1))] : [],
      previous ? [...archived.hashEntries(round('spans', n - 1))] : [],
      from,
      transcript.slice(from),
      previous ? [...archived.hashEntries(round('changes', n - 1))] : [],
      archived.list(stateLogKey('', step_id)).length,
      archived.hash(RUN_KEY_SUFFIX.pending)[`${step_id}|${n}|try`] ?? null,
      live[11],
    ];
  }

  /**
   * How far a step's stored state has come: the iterations it has folded in (its next provider
   * call is the one after them) and how many state log entries make its run state; undefined when
   * the step has no state yet. What a fork checks its iteration against.
   */
  async progress(run_id: string, step_id: string): Promise<{ readonly iterations: number; readonly state_entries: number } | undefined> {
    const json = await this.stateJson(run_id, step_id);
    if (json === undefined) return undefined;
    const { state } = readState(json, `state of ${run_id}/${step_id}`);
    return { iterations: state.iterations, state_entries: state.state_entries ?? 0 };
  }

  /**
   * A step's recorded rounds `1..through`, in order (what a fork copies, SPEC §15), in one round
   * trip; a round whose response is missing is unreadable.
   */
  async recordedRounds(run_id: string, step_id: string, through: number): Promise<RecordedRound[]> {
    if (through < 1) return [];
    const keys = this.context.keys.run(run_id);
    const pipeline = this.context.redis.pipeline();
    for (let n = 1; n <= through; n += 1) pipeline.get(keys.response(step_id, n)).hgetall(keys.results(step_id, n)).hgetall(keys.changes(step_id, n));
    const replies = (await pipeline.exec()) ?? [];
    // None of them live: the run may be compacted, its rounds in its archive.
    const archived = replies[0]?.[1] === null ? await readArchive(this.context.redis, this.context.keys, run_id) : undefined;
    const rounds: RecordedRound[] = [];
    for (let n = 1; n <= through; n += 1) {
      const round = (kind: 'response' | 'results' | 'changes') => roundKey('', step_id, kind, n);
      const [response, results, changes] = archived
        ? [archived.string(round('response')), archived.hash(round('results')), archived.hash(round('changes'))]
        : (replies.slice((n - 1) * 3, n * 3).map(([error, value]) => {
            if (error) throw error;
            return value;
          }) as [string | null, Record<string, string>, Record<string, string>]);
      const what = `response ${n} of ${run_id}/${step_id}`;
      if (response === null) throw new StoredFormatError(what, 'missing');
      rounds.push({ iteration: n, recorded: readResponse(response, what), results, changes });
    }
    return rounds;
  }

  /**
   * A step's state with all its messages (read from its transcript list after those this worker
   * has cached), or undefined when the step has none yet.
   */
  async loadState(run_id: string, step_id: string): Promise<StepState | undefined> {
    const { redis } = this.context;
    const keys = this.context.keys.run(run_id);
    const json = await this.stateJson(run_id, step_id);
    if (!json) return undefined;
    const stored = readState(json, `state of ${run_id}/${step_id}`);
    if (stored.kind === 'inline') return stored.state;
    const thread = stored.state.earlier ? await redis.hmget(keys.record, 'thread_id', 'thread_origin', 'thread_base') : [];
    return this.transcripts.load(run_id, step_id, stored, threadPlace(thread[0] ?? null, thread[1] ?? null, thread[2] ?? null));
  }

  /** A step's own conversation (`client.messages`): its messages but the thread's it began on; empty when it has no state yet. */
  async stepConversation(run_id: string, step_id: string): Promise<ChatMessage[]> {
    const json = await this.stateJson(run_id, step_id);
    return json ? this.transcripts.conversation(run_id, step_id, readState(json, `state of ${run_id}/${step_id}`)) : [];
  }

  /** A step's stored state (its JSON), from the run's archive once it is compacted. */
  private async stateJson(run_id: string, step_id: string): Promise<string | undefined> {
    const { redis, keys } = this.context;
    const json = await redis.hget(keys.run(run_id).state(step_id), 'json');
    if (json) return json;
    return (await readArchive(redis, keys, run_id))?.hash(stateKey('', step_id)).json;
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
    const outcome = await this.context.scripts.saveState([this.context.keys.record(run_id)], {
      step_id: state.step_id,
      expected: expectedIterations,
      iterations: state.iterations,
      json: writeState(state),
      count,
      from,
      messages: added,
      mark_running: markRunning,
      events: this.context.codec.pairs(events),
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
    cost_micros?: number,
    seen?: Pick<RunSpent, 'tokens' | 'tool_calls'>,
  ): Promise<{ recorded: RecordedResponse; recordedNow: boolean; ended?: EndedRunFacts } | { stale: Pick<RunSpent, 'tokens' | 'tool_calls'> } | undefined> {
    const { response } = recorded;
    const [outcome, stored, facts] = (await this.context.scripts.recordResponse([this.context.keys.record(run_id)], {
      step_id,
      iteration,
      response: writeResponse(recorded),
      usage: response.usage,
      has_calls: response.tool_calls.length > 0,
      events: this.context.codec.pairs(events),
      open_count: open.length,
      open_calls: open.length > 0 ? JSON.stringify(open.map((call) => [call.tool_call_id, call.tool_name, call.definition_hash ?? ''])) : '',
      tool_calls: executing,
      ending: end ? endingArgument(this.context, end) : undefined,
      stream,
      cost_micros,
      ...(seen ? { seen: { tokens: seen.tokens, tool_calls: seen.tool_calls } } : {}),
    })) as [number, string?, unknown?];
    if (outcome === -1) return undefined;
    if (outcome === -3) return { stale: { tokens: Number(stored), tool_calls: Number(facts) } };
    if (outcome === 0 && stored) return { recorded: readResponse(stored, `response ${iteration} of ${run_id}/${step_id}`), recordedNow: false };
    const ended = endedRunFacts(facts);
    return { recorded, recordedNow: true, ...(ended ? { ended } : {}) };
  }

  /**
   * The ids of the tool calls each given response asked for, in the model's order (undefined
   * where no response is recorded). One command for all of them.
   */
  async toolCallIds(run_id: string, responses: readonly CallPlace[]): Promise<(string[] | undefined)[]> {
    if (responses.length === 0) return [];
    const keys = this.context.keys.run(run_id);
    let stored = await this.context.redis.mget(...responses.map(({ step_id, iteration }) => keys.response(step_id, iteration)));
    if (stored.every((json) => json === null)) {
      const archived = await readArchive(this.context.redis, this.context.keys, run_id);
      if (archived) stored = responses.map(({ step_id, iteration }) => archived.string(roundKey('', step_id, 'response', iteration)));
    }
    return stored.map((json) => (json === null ? undefined : readResponse(json, `a response of ${run_id}`).response.tool_calls.map((call) => call.id)));
  }
}

/** loadStep.lua's reply (see its header). */
type LoadStepReply = [(string | null)[], string | null, string | null, string | null, string[], string[], number, string[], string[], number, string | null, string | null];

/** Where a run's thread conversation is, from its record's fields; undefined for a run on no thread (or one that began on none). */
function threadPlace(thread_id: string | null, origin: string | null, base: string | null): ThreadPlace | undefined {
  const count = Number(base);
  return thread_id != null && origin != null && Number.isSafeInteger(count) && count > 0 ? { thread_id, origin, count } : undefined;
}
