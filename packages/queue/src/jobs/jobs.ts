import type { JobsOptions } from 'bullmq';
import { type BudgetCaps, NamePattern, type ToolDefinition } from '@arcflow/core';
import { JobId } from '../redis/keys.ts';

/** W3C trace context carried in every job: the run's root span, and the span that enqueued the job. */
export interface TraceCarrier {
  readonly traceparent?: string;
  readonly from?: string;
}

/** A provider job: call number `iteration` of a step. Small: the conversation lives in the store. */
export interface ProviderJobData {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
  readonly trace: TraceCarrier;
}

/**
 * Where the loop goes on once a round is settled: provider job `n+1`, on this queue. Every tool
 * job of the round carries it, and the job that settles the round's last open call enqueues it
 * (the join), with the tool job's run, step and trace.
 */
export interface JoinTarget {
  readonly queue: string;
  readonly attempts: number;
}

/** The delayed job on a run's provider queue that times a waiting call out: one job kind for every kind of wait. */
export const WAIT_TIMEOUT_JOB = 'call-timeout';
/** The name approval timeouts were added under before there was more than one kind: still taken. */
export const APPROVAL_TIMEOUT_JOB = 'approval-timeout';

/** What a call waits for: a person's answer (SPEC §10) or a result from outside (SPEC §20). */
export type WaitKind = 'approval' | 'result';

/** A waiting call's timeout job: the call it times out, at this place. */
export interface WaitTimeoutData {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly trace: TraceCarrier;
  /** Absent in jobs added before results from outside existed: an approval's. */
  readonly kind?: WaitKind;
}

/** A tool job: one valid call of one round. */
export interface ToolJobData {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
  readonly index: number;
  readonly tool_call_id: string;
  readonly tool_name: string;
  /** The definition hash of the tool the call was planned with: only a worker holding that definition runs it. */
  readonly definition_hash: string;
  readonly args: unknown;
  readonly input_size_bytes: number;
  readonly trace: TraceCarrier;
  readonly join: JoinTarget;
  /** Set for a workflow's tool step: the job that settles the call settles the step and moves the workflow on. */
  readonly workflow?: string;
  /** Set when calls of the round wait for approval: settling this one may leave the run waiting. */
  readonly waits?: boolean;
  /** How many recorded entries make the run state the round began with (SPEC §17); absent: none (`{}`). */
  readonly state_entries?: number;
  /** The step whose state log holds them, when not the job's own (a workflow's tool step reads the run's, `run`). */
  readonly state_step?: string;
  /** The run state's limit, when the agent's is not the default. */
  readonly max_state_bytes?: number;
  /** An agent tool's call in a step with a budget: the step's caps, which the child's budget comes from (SPEC §13). */
  readonly budget?: BudgetCaps;
  /** An agent tool's call: whether its run streams, which its child run follows (SPEC §12). */
  readonly stream?: boolean;
}

/** The join of a tool job's round: provider job `n+1`, created by the same span as the tool job. */
export function joinJobData(data: ToolJobData): ProviderJobData {
  return { run_id: data.run_id, step_id: data.step_id, iteration: data.iteration + 1, trace: data.trace };
}

export const PROVIDER_JOB = 'provider';
export const PROVIDER_BACKOFF = 'arcflow-provider';

/**
 * A provider job's attempts: `perTarget` for each model its step may call (the agent's own, then
 * each of its `model_fallbacks`). Each model gets `perTarget` tries of the provider call (counted
 * in the call's recorded position, not by BullMQ); BullMQ's attempts bound the failures of the
 * job itself (a Redis error), whose retries go to the same model.
 */
export function providerAttempts(perTarget: number, targets: number): number {
  return perTarget * Math.max(1, targets);
}

/**
 * How many models a step may call: its own and the run config's `model_fallbacks` when the config
 * lists them (they replace the agent's), else `registered` (the agent's own count; 1 when unknown).
 */
export function stepTargets(config: { readonly model_fallbacks?: unknown } | undefined, registered: number | undefined): number {
  const listed = config?.model_fallbacks;
  if (Array.isArray(listed)) return 1 + listed.length;
  return Number.isSafeInteger(registered) && registered! >= 1 ? registered! : 1;
}

/** A job's options with its deterministic id (`JobId`). */
export type IdentifiedJobOptions = JobsOptions & { readonly jobId: string };

export function providerJobOptions(data: ProviderJobData, attempts: number): IdentifiedJobOptions {
  return { jobId: JobId.provider(data.run_id, data.step_id, data.iteration), attempts, backoff: { type: PROVIDER_BACKOFF } };
}

/**
 * A tool job's attempts are the tool's `retries` + 1, with exponential backoff and jitter between
 * them; a tool without retries gets neither option (BullMQ's default is one attempt). Job options
 * are stored with every job and read on every move, so they are kept to what differs per job:
 * retention is the workers' (see {@link finishedJobRetention}).
 */
export function toolJobOptions(data: ToolJobData, tool: ToolDefinition, backoffMs: number): IdentifiedJobOptions {
  const jobId = JobId.tool(data.run_id, data.step_id, data.iteration, data.tool_call_id);
  if (tool.retries === 0) return { jobId };
  return { jobId, attempts: tool.retries + 1, backoff: { type: 'exponential', delay: backoffMs, jitter: 0.5 } };
}

/** How many attempts BullMQ gives a job (its `attempts` option; 0 or absent means one). */
export function attemptsOf(job: { readonly opts: JobsOptions }): number {
  return Math.max(1, job.opts.attempts ?? 1);
}

/** How long workers keep finished jobs: as long as the runs they belong to (set on each BullMQ Worker). */
export function finishedJobRetention(retentionSeconds: number): { removeOnComplete: { age: number }; removeOnFail: { age: number } } {
  return { removeOnComplete: { age: retentionSeconds }, removeOnFail: { age: retentionSeconds } };
}

/** What is wrong with a provider job's data, if anything: its ids go into keys and events. */
export function malformedProviderJobData(data: ProviderJobData): string | undefined {
  if (data === null || typeof data !== 'object') return 'data is not an object';
  if (typeof data.run_id !== 'string' || !NamePattern.runId.test(data.run_id)) return 'run_id';
  if (typeof data.step_id !== 'string' || !NamePattern.stepId.test(data.step_id)) return 'step_id';
  if (!Number.isSafeInteger(data.iteration) || data.iteration < 1) return 'iteration';
  if (data.trace === null || typeof data.trace !== 'object') return 'trace';
  return undefined;
}

/** What is wrong with a tool job's data, if anything: its ids go into keys and events. */
export function malformedJobData(data: ToolJobData): string | undefined {
  if (data === null || typeof data !== 'object') return 'data is not an object';
  if (typeof data.run_id !== 'string' || !NamePattern.runId.test(data.run_id)) return 'run_id';
  if (typeof data.step_id !== 'string' || !NamePattern.stepId.test(data.step_id)) return 'step_id';
  if (!Number.isSafeInteger(data.iteration) || data.iteration < 1) return 'iteration';
  if (!Number.isSafeInteger(data.index) || data.index < 0) return 'index';
  if (typeof data.tool_call_id !== 'string' || !NamePattern.toolCallId.test(data.tool_call_id)) return 'tool_call_id';
  if (typeof data.tool_name !== 'string' || !NamePattern.tool.test(data.tool_name)) return 'tool_name';
  if (typeof data.definition_hash !== 'string' || !/^[0-9a-f]{16}$/.test(data.definition_hash)) return 'definition_hash';
  if (!Number.isSafeInteger(data.input_size_bytes) || data.input_size_bytes < 0) return 'input_size_bytes';
  if (data.join === null || typeof data.join !== 'object' || typeof data.join.queue !== 'string') return 'join';
  if (data.workflow !== undefined && (typeof data.workflow !== 'string' || !NamePattern.agent.test(data.workflow))) return 'workflow';
  if (data.state_entries !== undefined && (!Number.isSafeInteger(data.state_entries) || data.state_entries < 0)) return 'state_entries';
  if (data.state_step !== undefined && (typeof data.state_step !== 'string' || !NamePattern.stepId.test(data.state_step))) return 'state_step';
  if (data.max_state_bytes !== undefined && (!Number.isSafeInteger(data.max_state_bytes) || data.max_state_bytes < 2)) return 'max_state_bytes';
  if (data.budget !== undefined && !budgetCaps(data.budget)) return 'budget';
  if (data.stream !== undefined && typeof data.stream !== 'boolean') return 'stream';
  return undefined;
}

/** Whether a job's `budget` is caps this engine writes: an object of whole numbers (and a USD amount), each optional. */
function budgetCaps(budget: unknown): boolean {
  if (budget === null || typeof budget !== 'object') return false;
  const { max_total_tokens, max_tool_calls, max_cost_usd } = budget as BudgetCaps;
  const whole = (value: unknown) => value === undefined || (Number.isSafeInteger(value) && (value as number) >= 0);
  const usd = max_cost_usd === undefined || (typeof max_cost_usd === 'number' && Number.isFinite(max_cost_usd) && max_cost_usd >= 0);
  return whole(max_total_tokens) && whole(max_tool_calls) && usd;
}
