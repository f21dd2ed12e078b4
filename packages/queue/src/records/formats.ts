import type { ChatMessage, PlannedCall, ProviderResponse, ResponseDecision, RunSpent, StepState, TryPosition } from '@arcflow/core';

/**
 * The format of what the store keeps per step (its state, its recorded responses). Written into
 * every stored value and checked when read: a worker never acts on a value it cannot read.
 * Format 3 added structured output's repairs (a plan of type `repair_output`, a state's
 * `output_rejections`); a value is written in the oldest format that holds it, so a worker that
 * reads only format 2 goes on reading every run without structured output during a rolling deploy,
 * and leaves the rest (delayed) to a worker that reads 3.
 *
 * Format 4 is a step's state without its messages: they are in the step's transcript list (see
 * `transcriptKey`), appended once per save, and the state names how many of them it holds
 * (`messages`). Every state is saved in format 4 now (a worker of format 3 refuses it as newer,
 * and leaves the job to a worker that reads it); states of formats 2 and 3 (messages inline)
 * still load, and their next save moves their messages into the list.
 *
 * Format 5 is format 4 for a state that began on a thread's conversation (its `earlier`): those
 * messages stay in the thread's list, and the step's transcript list holds the others only. Only
 * such states are written in 5, so a worker of format 4 goes on with every other run.
 *
 * Format 6 is format 5 for a state whose run has a run state (SPEC §17: `state_entries`, the
 * changes recorded in the step's state log that it has seen); only such states are written in 6.
 */
export const STORE_FORMAT = 6;

/** The oldest format this worker reads. */
export const OLDEST_STORE_FORMAT = 2;

/** A stored value of a format this worker cannot read (a newer or an older arcflow wrote it). */
export class StoredFormatError extends Error {
  override readonly name = 'StoredFormatError';
  constructor(
    readonly what: string,
    readonly found: unknown,
  ) {
    super(
      found === 'missing'
        ? `${what} is missing from Redis`
        : found === 'malformed'
          ? `${what} is not as arcflow writes it (another process's write, or a corrupt one)`
          : `${what} is stored in format ${JSON.stringify(found) ?? 'none'}; this worker reads formats ${OLDEST_STORE_FORMAT} to ${STORE_FORMAT}`,
    );
  }

  /** A newer arcflow wrote it (a worker of that version can read it); otherwise no version can. */
  get newer(): boolean {
    return typeof this.found === 'number' && Number.isInteger(this.found) && this.found > STORE_FORMAT;
  }
}

/** One call of a recorded round: how the loop answered it, as decided when the response came. */
export interface RecordedCall {
  readonly index: number;
  readonly action: PlannedCall['action'];
  readonly signature: string;
  /** Ran as its own tool job, counted among the round's open calls. */
  readonly fanned_out: boolean;
  /** The call waited (or waits) for a person's approval before it runs. */
  readonly approval?: boolean;
}

/** What the loop decided on a response: recorded with it, so a later job never decides again. */
export type RecordedPlan =
  | { readonly type: 'complete' | 'fail' | 'final_answer' }
  | { readonly type: 'tools'; readonly calls: readonly RecordedCall[] }
  /** The answer failed the output schema (format 3): the next call tells the model this violation. */
  | { readonly type: 'repair_output'; readonly violation_description: string };

/** The model that answered a call: the agent's own, or one of its `model_fallbacks` (SPEC §16). */
export interface AnsweredBy {
  readonly provider_id: string;
  readonly model: string;
}

/**
 * A response as the store keeps it: the model's answer and the decision taken on it. Format 2
 * gained `target` as an optional field: a reader that predates it ignores it, and a response
 * recorded before it has none, so both directions of a rolling deploy read each other's values.
 */
export interface RecordedResponse {
  readonly response: ProviderResponse;
  readonly plan: RecordedPlan;
  /** What the run had spent before this response (the budget's view when the plan was decided); absent when it was nothing. */
  readonly spent?: RunSpent;
  /** The provider and model that answered; absent in responses recorded before fallbacks existed. */
  readonly target?: AnsweredBy;
}

/** The plan to record for a decision; `fansOut` says which calls became tool jobs. */
export function planOf(decision: ResponseDecision, fansOut: (planned: PlannedCall) => boolean): RecordedPlan {
  if (decision.type === 'repair_output') return { type: 'repair_output', violation_description: decision.violation_description };
  if (decision.type !== 'tools') return { type: decision.type };
  return {
    type: 'tools',
    calls: decision.calls.map((planned) => ({
      index: planned.index,
      action: planned.action,
      signature: planned.signature,
      fanned_out: fansOut(planned),
      ...(planned.action === 'execute' && planned.approval ? { approval: true } : {}),
    })),
  };
}

/** The decision with the approvals its recorded plan says the calls wait for (decided once, when the response was recorded). */
export function withRecordedApprovals(decision: ResponseDecision, plan: RecordedPlan): ResponseDecision {
  if (decision.type !== 'tools' || plan.type !== 'tools') return decision;
  const waiting = new Set(plan.calls.filter((call) => call.approval).map((call) => call.index));
  return { type: 'tools', calls: decision.calls.map((planned) => (planned.action === 'execute' ? { ...planned, approval: waiting.has(planned.index) } : planned)) };
}

/** Whether two plans answer every call the same way (signatures aside). */
export function samePlan(a: RecordedPlan, b: RecordedPlan): boolean {
  if (a.type !== b.type) return false;
  if (a.type !== 'tools' || b.type !== 'tools') return true;
  return (
    a.calls.length === b.calls.length &&
    a.calls.every((call, position) => {
      const other = b.calls[position]!;
      return call.index === other.index && call.action === other.action && call.fanned_out === other.fanned_out;
    })
  );
}

/**
 * A step's state as formats 4 and 5 store it: everything but its messages, and how many messages
 * it has in its transcript list (with 5, those beside the thread's it began on: see `ownMessages`).
 */
export function writeState(state: StepState): string {
  const { messages, ...rest } = state;
  return JSON.stringify({ v: state.state_entries ? 6 : state.earlier ? 5 : 4, messages: ownMessages(state).length, state: rest });
}

/** The messages of a state that its step's transcript list holds: all but the thread's it began on. */
export function ownMessages(state: Pick<StepState, 'messages' | 'earlier'>): readonly ChatMessage[] {
  const { messages, earlier } = state;
  return earlier ? [...messages.slice(0, earlier.at), ...messages.slice(earlier.at + earlier.count)] : messages;
}

/**
 * A stored state, read: `inline` (formats 2 and 3) carries its messages; `listed` (formats 4
 * and 5) says how many of the step's transcript list are its messages, which the caller reads
 * (and, with `earlier`, puts the thread's first messages among).
 */
export type StoredState =
  | { readonly kind: 'inline'; readonly state: StepState }
  | { readonly kind: 'listed'; readonly state: Omit<StepState, 'messages'>; readonly messages: number };

export function readState(json: string, what: string): StoredState {
  const value = unwrap(json, what);
  const state = value.state as StepState;
  if (typeof state !== 'object' || state === null || !Number.isInteger(state.iterations)) throw new StoredFormatError(`${what}'s state`, 'malformed');
  const rejections = state.output_rejections;
  if (rejections !== undefined && ((value.v as number) < 3 || !Number.isInteger(rejections) || rejections < 1))
    throw new StoredFormatError(`${what}'s output_rejections`, 'malformed');
  const entries = state.state_entries;
  if ((value.v === 6) !== (entries !== undefined) || (entries !== undefined && (!Number.isSafeInteger(entries) || entries < 1)))
    throw new StoredFormatError(`${what}'s state_entries`, 'malformed');
  if (value.v !== 4 && value.v !== 5 && value.v !== 6) {
    if (!Array.isArray(state.messages)) throw new StoredFormatError(`${what}'s messages`, 'malformed');
    return { kind: 'inline', state };
  }
  const count = value.messages;
  const { earlier } = state;
  if (!Number.isInteger(count) || (count as number) < 0 || 'messages' in state) throw new StoredFormatError(`${what}'s messages`, 'malformed');
  if ((value.v === 5 && earlier === undefined) || (value.v === 4 && earlier !== undefined) || (earlier !== undefined && !validEarlier(earlier, count as number)))
    throw new StoredFormatError(`${what}'s earlier messages`, 'malformed');
  return { kind: 'listed', state, messages: count as number };
}

/** A state's `earlier`: whole numbers, placed within the messages the list holds. */
function validEarlier(earlier: unknown, listed: number): boolean {
  const { at, count } = (earlier ?? {}) as { at?: unknown; count?: unknown };
  return Number.isSafeInteger(at) && Number.isSafeInteger(count) && (at as number) >= 0 && (count as number) > 0 && (at as number) <= listed;
}

/** A transcript list entry (one message's JSON), checked as far as the loop relies on it. */
export function readMessage(json: string, what: string): ChatMessage {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new StoredFormatError(what, 'unparseable');
  }
  if (typeof value !== 'object' || value === null || typeof (value as { role?: unknown }).role !== 'string') throw new StoredFormatError(what, 'malformed');
  return value as ChatMessage;
}

export function writeResponse(recorded: RecordedResponse): string {
  return JSON.stringify({ v: recorded.plan.type === 'repair_output' ? 3 : 2, ...recorded });
}

export function readResponse(json: string, what: string): RecordedResponse {
  const value = unwrap(json, what);
  const spent = value.spent as RunSpent | undefined;
  const target = value.target === undefined ? undefined : answeredBy(value.target, what);
  const plan = value.plan as RecordedPlan;
  if (plan?.type === 'repair_output' && (value.v !== 3 || typeof plan.violation_description !== 'string')) throw new StoredFormatError(`${what}'s plan`, 'malformed');
  return { response: value.response as ProviderResponse, plan, ...(spent ? { spent } : {}), ...(target ? { target } : {}) };
}

/** A recorded `target`, checked: two non-empty strings, else the value is unreadable. */
function answeredBy(value: unknown, what: string): AnsweredBy {
  const { provider_id, model } = (value ?? {}) as Record<string, unknown>;
  if (typeof provider_id !== 'string' || provider_id === '' || typeof model !== 'string' || model === '') throw new StoredFormatError(`${what}'s target`, 'malformed');
  return { provider_id, model };
}

function unwrap(json: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new StoredFormatError(what, 'unparseable');
  }
  const format = (value as { v?: unknown } | null)?.v;
  if (!Number.isInteger(format) || (format as number) < OLDEST_STORE_FORMAT || (format as number) > STORE_FORMAT) throw new StoredFormatError(what, format);
  return value as Record<string, unknown>;
}

/** A call's try position as stored beside its round (see `moveCall.lua`): `<entry>,<failures>,<waits>`. */
export function writeTryPosition(position: TryPosition): string {
  return `${position.entry},${position.failures},${position.waits}`;
}

/** A stored try position, checked: three whole numbers, else unreadable by any version. */
export function readTryPosition(text: string, what: string): TryPosition {
  const match = /^(\d{1,9}),(\d{1,9}),(\d{1,9})$/.exec(text);
  if (!match) throw new StoredFormatError(what, 'malformed');
  return { entry: Number(match[1]), failures: Number(match[2]), waits: Number(match[3]) };
}

/** Whether a Redis reply error says a key holds another type (another process's write). */
export function isWrongType(error: unknown): boolean {
  return error instanceof Error && error.message.includes('WRONGTYPE');
}

/** A read's `catch`: a key of another type is refused as `what`, not stored as arcflow writes it; any other error as it is. */
export function refuseWrongType(what: string): (error: unknown) => never {
  return (error) => {
    if (isWrongType(error)) throw new StoredFormatError(what, 'malformed');
    throw error;
  };
}
