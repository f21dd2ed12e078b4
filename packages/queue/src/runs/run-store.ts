import type { Redis } from 'ioredis';
import type { CallStore } from '../calls/call-store.ts';
import type { ApprovalResolution, ToolResultAnswer } from '@arcflow/core';
import type { WaitingStore } from '../calls/waiting/waiting-store.ts';
import type { ChildStore } from '../calls/waiting/child-store.ts';
import type { Keys } from '../redis/keys.ts';
import type { StateLogs } from '../steps/state-log.ts';
import type { StepStore } from '../steps/step-store.ts';
import { type Runs, Store } from '../store.ts';
import { storeContext } from '../store-context.ts';

/**
 * The durable run store in Redis, as `@arcflow/queue` exports it: the {@link Store} of one
 * connection and prefix, and each part's operations under the names workers and clients call
 * (the run record, each step's state, memoized provider responses, recorded tool results and the
 * event log). Every write that must happen once is one Lua script, beside the part that runs it.
 */
export class RunStore extends Store {
  readonly keys: Keys;
  /** Calls waiting for a person's approval. */
  readonly approvals: WaitingStore<ApprovalResolution>;
  /** Calls waiting for a result from outside (SPEC §20). */
  readonly toolResults: WaitingStore<ToolResultAnswer>;
  /** Child runs' ties to their parents' calls (SPEC §13). */
  readonly children: ChildStore;
  /** The runs' states (SPEC §17), as lists of recorded changes. */
  readonly stateLogs: StateLogs;

  constructor(
    redis: Redis,
    readonly prefix: string,
    readonly retentionSeconds: number,
  ) {
    const context = storeContext(redis, prefix, retentionSeconds);
    super(context);
    this.keys = context.keys;
    this.approvals = this.calls.approvals;
    this.toolResults = this.calls.toolResults;
    this.children = this.calls.children;
    this.stateLogs = this.steps.stateLogs;
  }

  createRun(...args: Parameters<Runs['records']['createRun']>) {
    return this.runs.records.createRun(...args);
  }
  claimRootSpan(run_id: string) {
    return this.runs.records.claimRootSpan(run_id);
  }
  getSpec(run_id: string) {
    return this.runs.records.getSpec(run_id);
  }
  requestHash(run_id: string) {
    return this.runs.records.requestHash(run_id);
  }
  status(run_id: string) {
    return this.runs.records.status(run_id);
  }
  threadOf(run_id: string) {
    return this.runs.records.threadOf(run_id);
  }
  getRun(run_id: string) {
    return this.runs.records.getRun(run_id);
  }
  findIdempotent(key: string) {
    return this.runs.records.findIdempotent(key);
  }
  listRuns(...args: Parameters<Runs['listing']['listRuns']>) {
    return this.runs.listing.listRuns(...args);
  }
  trimRunIndexes(agents: readonly string[]) {
    return this.runs.listing.trimRunIndexes(agents);
  }
  tags() {
    return this.runs.listing.tags();
  }
  append(...args: Parameters<Runs['events']['append']>) {
    return this.runs.events.append(...args);
  }
  events(...args: Parameters<Runs['events']['events']>) {
    return this.runs.events.events(...args);
  }
  finishRun(...args: Parameters<Runs['endings']['finishRun']>) {
    return this.runs.endings.finishRun(...args);
  }
  compactRun(run_id: string) {
    return this.runs.compaction.compact(run_id);
  }
  loadStep(...args: Parameters<StepStore['loadStep']>) {
    return this.steps.loadStep(...args);
  }
  loadState(run_id: string, step_id: string) {
    return this.steps.loadState(run_id, step_id);
  }
  stepConversation(run_id: string, step_id: string) {
    return this.steps.stepConversation(run_id, step_id);
  }
  threadMessages(...args: Parameters<StepStore['threadMessages']>) {
    return this.steps.threadMessages(...args);
  }
  saveState(...args: Parameters<StepStore['saveState']>) {
    return this.steps.saveState(...args);
  }
  recordResponse(...args: Parameters<StepStore['recordResponse']>) {
    return this.steps.recordResponse(...args);
  }
  toolCallIds(...args: Parameters<StepStore['toolCallIds']>) {
    return this.steps.toolCallIds(...args);
  }
  runGoesOn(...args: Parameters<CallStore['runGoesOn']>) {
    return this.calls.runGoesOn(...args);
  }
  startToolCall(...args: Parameters<CallStore['startToolCall']>) {
    return this.calls.startToolCall(...args);
  }
  recordToolResult(...args: Parameters<CallStore['recordToolResult']>) {
    return this.calls.recordToolResult(...args);
  }
  recordToolResultWithin(...args: Parameters<CallStore['recordToolResultWithin']>) {
    return this.calls.recordToolResultWithin(...args);
  }
  moveCall(...args: Parameters<CallStore['moveCall']>) {
    return this.calls.moveCall(...args);
  }
}
