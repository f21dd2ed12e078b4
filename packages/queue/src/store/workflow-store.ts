import type { EventDraft, GraphStep, RunError, StateChange, StepRecord, StepSkip, StepStatus } from '@arcflow/core';
import { stepSkippedEvent, stepStartedEvent } from '@arcflow/core';
import type { Redis } from 'ioredis';
import type { Keys } from '../keys.ts';
import type { PendingEvent, RunOutcome } from './run-store.ts';
import type { StoreScripts } from './script-runner.ts';
import { parseEntry } from './state-log.ts';

/** How the store turns events into what its scripts take (the run store's own encoding). */
interface EventCodec {
  pairs(events: readonly PendingEvent[]): [string, string][];
  eventJson(event: EventDraft, ts?: number): string;
}

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
}

/**
 * A workflow run's steps in Redis: their statuses (moved forward only, each move once, by the
 * scripts `startSteps` and `settleStep`), outputs and errors. A step's status is the one fact
 * concurrent workers agree on: whoever moves it first wins, and everyone reads the result.
 */
export class WorkflowStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly scripts: StoreScripts,
    private readonly codec: EventCodec,
  ) {}

  /** Ends a step once; returns whether this call ended it and the steps as they stand after it, or undefined when the run has ended. */
  async settleStep(run_id: string, ending: StepEnding): Promise<{ settledNow: boolean; view: StepsView } | undefined> {
    const { outcome } = ending;
    const [settled, fields] = (await this.scripts.settleStep([this.keys.record(run_id)], {
      step_id: ending.step_id,
      status: outcome.status,
      output: outcome.status === 'completed' ? outcome.output : undefined,
      error: outcome.status === 'failed' ? JSON.stringify(outcome.error) : undefined,
      ts: Date.now(),
      events: this.codec.pairs(ending.events ?? []),
      completed: ending.completed ? this.codec.eventJson(ending.completed) : undefined,
      state_changes: ending.state_changes && ending.state_changes.length > 0 && outcome.status === 'completed' ? JSON.stringify(ending.state_changes) : undefined,
    })) as [number, string[]?];
    if (settled === -1) return undefined;
    return { settledNow: settled === 1, view: viewOf(fields ?? []) };
  }

  /** Starts and skips steps still pending, each with its event; false when the run has ended. */
  async startSteps(run_id: string, start: readonly GraphStep[], skip: readonly StepSkip[]): Promise<boolean> {
    const ts = Date.now();
    const result = await this.scripts.startSteps([this.keys.record(run_id)], {
      ts,
      start: start.map((step) => [step.id, this.codec.eventJson(stepStartedEvent(step), ts)]),
      skip: skip.map((entry) => [entry.step_id, this.codec.eventJson(stepSkippedEvent(entry), ts)]),
    });
    return result === 1;
  }

  /** Opens a tool step's one call; how many of its calls are open (1, or 0 once settled), or undefined when the run has ended. */
  async openToolStep(run_id: string, step_id: string, tool_name: string, definition_hash: string): Promise<{ opened: boolean; open: number } | undefined> {
    const [opened, open] = (await this.scripts.openToolStep([this.keys.record(run_id)], [step_id, tool_name, definition_hash])) as [number, number?];
    if (opened === -1) return undefined;
    return opened === 1 ? { opened: true, open: 1 } : { opened: false, open: open ?? 0 };
  }

  /** A tool step's call result and its failure code ('' when it completed), once recorded. */
  async toolStepResult(run_id: string, step_id: string): Promise<{ content: string; failure: string; changes: StateChange[] } | undefined> {
    const keys = this.keys.run(run_id);
    const [[content, failure], changes] = await Promise.all([
      this.redis.hmget(keys.results(step_id, 1), step_id, `${step_id}|error`),
      this.redis.hget(keys.changes(step_id, 1), step_id),
    ]);
    if (content == null) return undefined;
    return { content, failure: failure ?? '', changes: changes ? parseEntry(changes, `state changes of step ${step_id} of ${run_id}`) : [] };
  }

  async view(run_id: string): Promise<StepsView> {
    return viewOf(flatten(await this.redis.hgetall(this.keys.run(run_id).steps)));
  }

  /** Outputs of the given steps (undefined where a step has none). */
  async outputs(run_id: string, step_ids: readonly string[]): Promise<Record<string, string | undefined>> {
    if (step_ids.length === 0) return {};
    const values = await this.redis.hmget(this.keys.run(run_id).outputs, ...step_ids);
    return Object.fromEntries(step_ids.map((id, index) => [id, values[index] ?? undefined]));
  }

  async stepError(run_id: string, step_id: string): Promise<RunError | undefined> {
    const json = await this.redis.hget(this.keys.run(run_id).outputs, `${step_id}|error`);
    return json ? (JSON.parse(json) as RunError) : undefined;
  }

  /** Every step as a run record shows it. */
  async stepRecords(run_id: string): Promise<Record<string, StepRecord>> {
    const keys = this.keys.run(run_id);
    const [steps, outputs] = await Promise.all([this.redis.hgetall(keys.steps), this.redis.hgetall(keys.outputs)]);
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
