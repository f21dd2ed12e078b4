import type { EventDraft, GraphStep, RunError, StateChange, StepRecord, StepSkip, StepStatus } from '@arcflow/core';
import { DEFAULT_MAX_STATE_BYTES, RUN_STEP_ID, applyStateChangesSized, stepFailedEvent, stepSkippedEvent, stepStartedEvent, stepStateTooLarge } from '@arcflow/core';
import { readArchive } from '../records/archive.ts';
import type { PendingEvent } from '../records/event-codec.ts';
import { RUN_KEY_SUFFIX, roundKey } from '../redis/keys.ts';
import type { RunOutcome } from '../runs/ending.ts';
import { type StateLogs, parseEntry } from '../steps/state-log.ts';
import type { StoreContext } from '../store-context.ts';

/** Every step's status, and the step that failed first (if one has). */
export interface StepsView {
  readonly statuses: Readonly<Record<string, StepStatus>>;
  /** When each started step started (ms). */
  readonly started: Readonly<Record<string, number>>;
  readonly first_failed?: string;
}

/** A step's end as a worker reports it: its outcome, its last events, and its `StepCompleted` when it completed. */
export interface StepEnding {
  readonly step_id: string;
  readonly outcome: Exclude<RunOutcome, { status: 'cancelled' }>;
  readonly events?: readonly PendingEvent[];
  readonly completed?: EventDraft;
  /** A completed step's run-state changes (SPEC §17): applied to the run's state as it completes, once. */
  readonly state_changes?: readonly StateChange[];
  /** The most the run's state may take with `state_changes` (the step's agent's; default 262,144). */
  readonly max_state_bytes?: number;
}

/**
 * A workflow run's steps in Redis: their statuses (moved forward only, each move once, by the
 * scripts `startSteps` and `settleStep`), outputs and errors. A step's status is the one fact
 * concurrent workers agree on: whoever moves it first wins, and everyone reads the result.
 */
export class WorkflowStore {
  constructor(
    private readonly context: StoreContext,
    private readonly stateLogs: StateLogs,
  ) {}

  /**
   * Ends a step once; returns whether this call ended it and the steps as they stand after it, or
   * undefined when the run has ended. A completed step's state changes apply only if the run's state
   * as it stands, with them, stays within `max_state_bytes` (steps side by side complete in any
   * order: SPEC §17); else the step fails `state_too_large`, applying none of them. The script
   * refuses a check made on a run state that another step changed meanwhile, and it is made again.
   */
  async settleStep(run_id: string, input: StepEnding): Promise<{ settledNow: boolean; view: StepsView } | undefined> {
    for (;;) {
      const { ending, state_at } = await this.withinStateLimit(run_id, input);
      const settled = await this.settleOnce(run_id, ending, state_at);
      if (settled !== 'stale') return settled;
    }
  }

  /** The ending as it stands against the run's state now, and how many entries that state is (for a step whose changes apply). */
  private async withinStateLimit(run_id: string, ending: StepEnding): Promise<{ ending: StepEnding; state_at?: number }> {
    const changes = ending.state_changes;
    if (ending.outcome.status !== 'completed' || !changes || changes.length === 0) return { ending };
    const state_at = await this.stateLogs.length(run_id, RUN_STEP_ID);
    const before = await this.stateLogs.readSized(run_id, RUN_STEP_ID, state_at);
    const max_state_bytes = ending.max_state_bytes ?? DEFAULT_MAX_STATE_BYTES;
    if (applyStateChangesSized(before.state, before.size, changes).size <= max_state_bytes) return { ending, state_at };
    const error = stepStateTooLarge(ending.step_id, max_state_bytes);
    return { ending: { step_id: ending.step_id, outcome: { status: 'failed', error }, events: [...(ending.events ?? []), { event: stepFailedEvent(ending.step_id, error) }] } };
  }

  private async settleOnce(run_id: string, ending: StepEnding, state_at: number | undefined): Promise<{ settledNow: boolean; view: StepsView } | 'stale' | undefined> {
    const { outcome } = ending;
    const [settled, fields] = (await this.context.scripts.settleStep([this.context.keys.record(run_id)], {
      step_id: ending.step_id,
      status: outcome.status,
      output: outcome.status === 'completed' ? outcome.output : undefined,
      error: outcome.status === 'failed' ? JSON.stringify(outcome.error) : undefined,
      ts: Date.now(),
      events: this.context.codec.pairs(ending.events ?? []),
      completed: ending.completed ? this.context.codec.eventJson(ending.completed) : undefined,
      state_changes: ending.state_changes && ending.state_changes.length > 0 && outcome.status === 'completed' ? JSON.stringify(ending.state_changes) : undefined,
      state_at,
    })) as [number, string[]?];
    if (settled === -1) return undefined;
    if (settled === -2) return 'stale';
    return { settledNow: settled === 1, view: viewOf(fields ?? []) };
  }

  /** Starts and skips steps still pending, each with its event; false when the run has ended. */
  async startSteps(run_id: string, start: readonly GraphStep[], skip: readonly StepSkip[]): Promise<boolean> {
    const ts = Date.now();
    const result = await this.context.scripts.startSteps([this.context.keys.record(run_id)], {
      ts,
      start: start.map((step) => [step.id, this.context.codec.eventJson(stepStartedEvent(step), ts)]),
      skip: skip.map((entry) => [entry.step_id, this.context.codec.eventJson(stepSkippedEvent(entry), ts)]),
    });
    return result === 1;
  }

  /** Opens a tool step's one call; how many of its calls are open (1, or 0 once settled), or undefined when the run has ended. */
  async openToolStep(run_id: string, step_id: string, tool_name: string, definition_hash: string): Promise<{ opened: boolean; open: number } | undefined> {
    const [opened, open] = (await this.context.scripts.openToolStep([this.context.keys.record(run_id)], [step_id, tool_name, definition_hash])) as [number, number?];
    if (opened === -1) return undefined;
    return opened === 1 ? { opened: true, open: 1 } : { opened: false, open: open ?? 0 };
  }

  /** A tool step's call result and its failure code ('' when it completed), once recorded. */
  async toolStepResult(run_id: string, step_id: string): Promise<{ content: string; failure: string; changes: StateChange[] } | undefined> {
    const keys = this.context.keys.run(run_id);
    const [[content, failure], changes] = await Promise.all([
      this.context.redis.hmget(keys.results(step_id, 1), step_id, `${step_id}|error`),
      this.context.redis.hget(keys.changes(step_id, 1), step_id),
    ]);
    if (content == null) {
      // A compacted run's (it has ended): from its archive.
      const archived = await readArchive(this.context.redis, this.context.keys, run_id);
      const results = archived?.hash(roundKey('', step_id, 'results', 1));
      const recorded = results?.[step_id];
      if (recorded === undefined) return undefined;
      const stored = archived!.hash(roundKey('', step_id, 'changes', 1))[step_id];
      return { content: recorded, failure: results![`${step_id}|error`] ?? '', changes: stored ? parseEntry(stored, `state changes of step ${step_id} of ${run_id}`) : [] };
    }
    return { content, failure: failure ?? '', changes: changes ? parseEntry(changes, `state changes of step ${step_id} of ${run_id}`) : [] };
  }

  async view(run_id: string): Promise<StepsView> {
    return viewOf(flatten(await this.hash(run_id, RUN_KEY_SUFFIX.steps)));
  }

  /** Outputs of the given steps (undefined where a step has none). */
  async outputs(run_id: string, step_ids: readonly string[]): Promise<Record<string, string | undefined>> {
    if (step_ids.length === 0) return {};
    const outputs = await this.hash(run_id, RUN_KEY_SUFFIX.outputs);
    return Object.fromEntries(step_ids.map((id) => [id, outputs[id]]));
  }

  async stepError(run_id: string, step_id: string): Promise<RunError | undefined> {
    const json = (await this.hash(run_id, RUN_KEY_SUFFIX.outputs))[`${step_id}|error`];
    return json ? (JSON.parse(json) as RunError) : undefined;
  }

  /** One of the run's hashes (steps, outputs), from its archive once the run is compacted. */
  private async hash(run_id: string, suffix: string): Promise<Record<string, string>> {
    const { redis, keys } = this.context;
    const fields = await redis.hgetall(keys.record(run_id) + suffix);
    if (Object.keys(fields).length > 0) return fields;
    return (await readArchive(redis, keys, run_id))?.hash(suffix) ?? fields;
  }

  /** Where each completed step's run-state changes are in the run's state log (SPEC §17): step id → entry index. */
  async stateEntries(run_id: string): Promise<Map<string, number>> {
    const entries = new Map<string, number>();
    for (const [field, value] of Object.entries(await this.hash(run_id, RUN_KEY_SUFFIX.steps))) {
      if (field.endsWith(STATE_AT) && /^\d+$/.test(value)) entries.set(field.slice(0, -STATE_AT.length), Number(value));
    }
    return entries;
  }

  /** Every step as a run record shows it. */
  async stepRecords(run_id: string): Promise<Record<string, StepRecord>> {
    const [steps, outputs] = await Promise.all([this.hash(run_id, RUN_KEY_SUFFIX.steps), this.hash(run_id, RUN_KEY_SUFFIX.outputs)]);
    const records: Record<string, StepRecord> = {};
    for (const [id, status] of Object.entries(steps)) {
      if (id.includes('|')) continue;
      const output = outputs[id];
      const error = outputs[`${id}|error`];
      records[id] = { status: status as StepStatus, ...(output !== undefined ? { output } : {}), ...(error ? { error: JSON.parse(error) as RunError } : {}) };
    }
    return records;
  }
}

/** The suffix of a step's field in the steps hash that holds its state log entry's index. */
const STATE_AT = '|state_at';

function flatten(record: Record<string, string>): string[] {
  return Object.entries(record).flat();
}

/** The steps hash (field/value pairs) as statuses and the first failure. */
function viewOf(fields: readonly string[]): StepsView {
  const statuses: Record<string, StepStatus> = {};
  const started: Record<string, number> = {};
  let first_failed: string | undefined;
  for (let index = 0; index + 1 < fields.length; index += 2) {
    const field = fields[index]!;
    const value = fields[index + 1]!;
    if (field === '|first_failed') first_failed = value;
    else if (field.endsWith('|t0')) started[field.slice(0, -3)] = Number(value);
    else if (!field.includes('|')) statuses[field] = value as StepStatus;
  }
  return first_failed === undefined ? { statuses, started } : { statuses, started, first_failed };
}
