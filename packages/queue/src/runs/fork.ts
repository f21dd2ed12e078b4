import { randomBytes } from 'node:crypto';
import { type ChatMessage, RUN_STEP_ID, type RunInput, type RunRecord, type RunState, RequestError, type WorkflowGraph } from '@arcflow/core';
import type { RunSpec } from '../records/run-spec.ts';
import { nearestName } from '../records/nearest-name.ts';
import { partitionOf } from '../redis/partitions.ts';
import type { RecordedRound } from '../steps/step-store.ts';
import { parseEntry } from '../steps/state-log.ts';
import { ThreadStore } from '../threads/thread-store.ts';
import type { ForkCopy } from './records.ts';
import type { RunStore } from './run-store.ts';
import { unknownRun } from './unknown-run.ts';

/**
 * Fork and retry (SPEC §15): a new run that replays a source run's recorded rounds before an
 * iteration — no model call, no tool execution — and runs live from there, with the definition the
 * workers have now. The source is read only through the store's reading methods; the new run, its
 * copied rounds, its branch of the source's thread and a retry's `retried_by` mark on the source
 * are written by one script (`createRun.lua`), in the source's partition. The loop replays a
 * copied round as it does a re-delivered provider job's recorded response (see `replayCopied`).
 */

/** What `client.fork` is asked for: where to fork from, and optionally a new config or exec_config. */
export interface ForkRequest {
  from: { step_id?: string; iteration?: number };
  config?: unknown;
  exec_config?: unknown;
}

/** A fork as the client enqueues it: the new run's request fields and what its script copies. */
export interface ForkPlan {
  readonly agent: string;
  readonly input: RunInput;
  readonly config: unknown;
  readonly exec_config: unknown;
  readonly state: RunState;
  readonly stream?: boolean;
  /** The new thread a fork of a thread run runs on (a branch of the source's thread). */
  readonly thread_id?: string;
  /** The source's tenant and priority (SPEC §14): a fork is the same customer's work. */
  readonly tenant?: string;
  readonly priority?: number;
  readonly copy: ForkCopy;
  /** The partition the new run is minted in: the source's, so a retry marks its source in the same write. */
  readonly partition: number | undefined;
}

/** What a fork reads of its source: the record, its thread and the store, and a workflow's graph as registered. */
interface ForkDeps {
  readonly store: RunStore;
  readonly threads: ThreadStore;
  readonly prefix: string;
  lookup(agent: string): Promise<{ readonly workflow?: WorkflowGraph } | undefined>;
}

/** The fork a request asks for, checked against the source run; `unknown_run` or `invalid_request` when it cannot be. */
export async function planFork(deps: ForkDeps, run_id: string, request: ForkRequest, retry = false): Promise<ForkPlan> {
  const { store } = deps;
  const [record, spec] = await Promise.all([store.getRun(run_id), store.getSpec(run_id)]);
  if (!record || !spec) throw unknownRun(run_id, deps.prefix);
  if (record.workflow) return planWorkflowFork(deps, record, spec, request, retry);
  const step_id = request.from.step_id ?? 's1';
  if (step_id !== 's1') throw new RequestError('invalid_request', `from.step_id: run '${run_id}' has no step '${step_id}' (an agent run has one step, 's1')`);
  const progress = await store.steps.progress(run_id, step_id);
  const last = (progress?.iterations ?? 0) + 1;
  const { iteration } = request.from;
  if (!Number.isSafeInteger(iteration) || iteration! < 1 || iteration! > last) {
    throw new RequestError(
      'invalid_request',
      `from.iteration: expected an integer from 1 to ${last} (the last iteration of ${run_id}/${step_id}), got ${JSON.stringify(iteration)}`,
    );
  }
  // Every folded round: those before the fork are copied, and all of them tell the state log's initial entries apart.
  const folded = await store.steps.recordedRounds(run_id, step_id, progress?.iterations ?? 0);
  const state = await initialState(store, run_id, step_id, folded, progress?.state_entries);
  const partition = partitionOf(run_id);
  const thread = record.thread_id ? await branchThread(deps, run_id, record.thread_id, partition) : undefined;
  return {
    agent: spec.agent,
    input: spec.input,
    config: request.config !== undefined ? request.config : (spec.config ?? undefined),
    exec_config: request.exec_config !== undefined ? request.exec_config : (spec.exec_config ?? undefined),
    state,
    ...(spec.stream !== undefined ? { stream: spec.stream } : {}),
    ...(thread ? { thread_id: thread.thread_id } : {}),
    ...ownerOf(record),
    copy: {
      forked_from: { run_id, step_id, iteration: iteration! },
      rounds: folded.slice(0, iteration! - 1).map((round) => ({ ...round, step_id })),
      copied: { [step_id]: iteration! - 1 },
      ...(thread ? { thread } : {}),
      ...(retry ? { retry: true } : {}),
    },
    partition,
  };
}

/**
 * A fork of a workflow run (SPEC §7, §15): `from.step_id` and every step downstream of it run
 * again (that step from `from.iteration`, default 1); the other steps that completed keep their
 * recorded outputs and make no calls. A retry re-runs every step that did not complete, each
 * failed or cancelled one from the iteration it stopped at. The fork begins with the run state
 * of the steps it keeps (see `stateWithout`).
 */
async function planWorkflowFork(deps: ForkDeps, record: RunRecord, spec: RunSpec, request: ForkRequest, retry: boolean): Promise<ForkPlan> {
  const { run_id } = record;
  const graph = (await deps.lookup(spec.agent))?.workflow;
  if (!graph) throw new RequestError('invalid_request', `workflow '${spec.agent}' of run '${run_id}' is not registered: a fork needs its graph`);
  const steps = record.steps ?? {};
  const completed = (id: string) => steps[id]?.status === 'completed';
  const rerun = new Map<string, number>();
  if (retry) {
    for (const step of graph.steps) if (!completed(step.id)) rerun.set(step.id, await lastIteration(deps.store, run_id, step.id));
  } else {
    const from = request.from.step_id;
    if (from === undefined)
      throw new RequestError('invalid_request', `from.step_id: run '${run_id}' is a workflow run; name the step to re-run (${graph.steps.map((step) => step.id).join(', ')})`);
    if (!graph.steps.some((step) => step.id === from)) {
      const steps = graph.steps.map((step) => step.id);
      const nearest = nearestName(from, steps);
      throw new RequestError(
        'invalid_request',
        `from.step_id: workflow '${graph.name}' has no step '${from}'${nearest ? `; did you mean '${nearest}'?` : ''} (steps: ${steps.join(', ')})`,
      );
    }
    const last = await lastIteration(deps.store, run_id, from);
    const iteration = request.from.iteration ?? 1;
    if (iteration > last)
      throw new RequestError('invalid_request', `from.iteration: expected an integer from 1 to ${last} (the last iteration of ${run_id}/${from}), got ${iteration}`);
    for (const id of [from, ...downstream(graph, from)]) rerun.set(id, id === from ? iteration : 1);
    // A step outside them that did not complete has no output to keep: it runs again too, from where it stopped.
    for (const step of graph.steps) if (!rerun.has(step.id) && !completed(step.id)) rerun.set(step.id, await lastIteration(deps.store, run_id, step.id));
  }
  if (rerun.size === 0) throw new RequestError('invalid_request', `run '${run_id}' has no step to run again`);
  const rounds: (RecordedRound & { step_id: string })[] = [];
  const copied: Record<string, number> = {};
  for (const [step_id, iteration] of rerun) {
    if (iteration <= 1) continue;
    for (const round of await deps.store.steps.recordedRounds(run_id, step_id, iteration - 1)) rounds.push({ ...round, step_id });
    copied[step_id] = iteration - 1;
  }
  const kept = graph.steps.filter((step) => !rerun.has(step.id));
  const start = graph.steps.filter((step) => rerun.has(step.id) && step.depends_on.every((id) => !rerun.has(id))).map((step) => step.id);
  const first = graph.steps.find((step) => rerun.has(step.id))!.id;
  const forkedStep = retry ? first : request.from.step_id!;
  return {
    agent: spec.agent,
    input: spec.input,
    config: request.config !== undefined ? request.config : (spec.config ?? undefined),
    exec_config: request.exec_config !== undefined ? request.exec_config : (spec.exec_config ?? undefined),
    state: await stateWithout(deps.store, run_id, rerun.keys()),
    ...(spec.stream !== undefined ? { stream: spec.stream } : {}),
    ...ownerOf(record),
    copy: {
      forked_from: { run_id, step_id: forkedStep, iteration: rerun.get(forkedStep)! },
      rounds,
      copied,
      workflow: { start, kept: kept.map((step) => [step.id, steps[step.id]?.output ?? '']) },
      ...(retry ? { retry: true } : {}),
    },
    partition: partitionOf(run_id),
  };
}

/**
 * A workflow fork's run state (SPEC §17): the source's initial state and the changes of the steps it
 * keeps, as they were applied; the changes of the steps it runs again are left out, as they will be
 * made again. A step settled before steps noted their entry (an earlier version) cannot be told apart
 * and stays in.
 */
async function stateWithout(store: RunStore, run_id: string, rerun: Iterable<string>): Promise<RunState> {
  const entries = await store.workflows.stateEntries(run_id);
  const left_out = new Set<number>();
  for (const step_id of rerun) {
    const at = entries.get(step_id);
    if (at !== undefined) left_out.add(at);
  }
  return store.stateLogs.readWithout(run_id, RUN_STEP_ID, left_out);
}

/** The tenant and priority a fork takes from its source's record, as given there. */
function ownerOf(record: RunRecord): { tenant?: string; priority?: number } {
  return { ...(record.tenant !== undefined ? { tenant: record.tenant } : {}), ...(record.priority !== undefined ? { priority: record.priority } : {}) };
}

/** The steps that depend on `step_id`, directly or not. */
function downstream(graph: WorkflowGraph, step_id: string): string[] {
  const found = new Set<string>();
  let grew = true;
  while (grew) {
    grew = false;
    for (const step of graph.steps) {
      if (found.has(step.id) || !step.depends_on.some((id) => id === step_id || found.has(id))) continue;
      found.add(step.id);
      grew = true;
    }
  }
  return graph.steps.filter((step) => found.has(step.id)).map((step) => step.id);
}

/** A step's last iteration: the one after those its state has folded in (1 for a step that never began). */
async function lastIteration(store: RunStore, run_id: string, step_id: string): Promise<number> {
  return ((await store.steps.progress(run_id, step_id))?.iterations ?? 0) + 1;
}

/** Where a retry forks from (SPEC §15): the iteration a failed or cancelled run stopped at; `invalid_request` for any other run. */
export async function retryPoint(deps: ForkDeps, run_id: string): Promise<ForkRequest> {
  const status = await deps.store.status(run_id);
  if (!status) throw unknownRun(run_id, deps.prefix);
  if (status !== 'failed' && status !== 'cancelled') throw new RequestError('invalid_request', `run '${run_id}' is ${status}: only a failed or cancelled run can be retried`);
  // A workflow run's retry picks its steps itself (see planWorkflowFork).
  return { from: { step_id: 's1', iteration: await lastIteration(deps.store, run_id, 's1') } };
}

/** Whether a run may be retried now: failed or cancelled, and not retried before. */
export function retriable(run: RunRecord): boolean {
  return (run.status === 'failed' || run.status === 'cancelled') && run.retried_by === undefined;
}

/**
 * The run state the source began with (SPEC §17): the first entries of its state log, those before
 * any folded round's (each round that changed the state added one entry). The fork begins with it
 * and replays the copied rounds' changes, so at its first live iteration it holds the state as it
 * stood before that iteration.
 */
async function initialState(store: RunStore, run_id: string, step_id: string, folded: readonly RecordedRound[], entries: number | undefined): Promise<RunState> {
  const logged = entries ?? (await store.stateLogs.length(run_id, step_id));
  const changing = folded.filter((round) => changedState(round, `${run_id}/${step_id}`)).length;
  return store.stateLogs.read(run_id, step_id, Math.max(0, logged - changing));
}

/** Whether a folded round added a state log entry: one of its planned calls recorded changes. */
function changedState(round: RecordedRound, where: string): boolean {
  const { response, plan } = round.recorded;
  if (plan.type !== 'tools') return false;
  return plan.calls.some((entry) => {
    const line = round.changes[response.tool_calls[entry.index]?.id ?? ''];
    return line !== undefined && parseEntry(line, `state changes of round ${round.iteration} of ${where}`).length > 0;
  });
}

/**
 * A branch of a thread run's thread (SPEC §11, §15): a new thread id, in the source's partition,
 * that begins with the source thread's messages as they stood before the source run.
 */
async function branchThread(deps: ForkDeps, run_id: string, thread_id: string, partition: number | undefined): Promise<{ thread_id: string; messages: ChatMessage[] }> {
  const [base, messages, { count }] = await Promise.all([deps.threads.base(run_id), deps.threads.messages(thread_id), deps.store.partitions.read()]);
  let branch: string;
  // Thread ids are placed by hash: the first that lands in the source's partition keeps the fork in one slot.
  do branch = `${thread_id.slice(0, 100)}.fork-${randomBytes(6).toString('hex')}`;
  while (partition !== undefined && ThreadStore.partitionOf(branch, count) !== partition);
  return { thread_id: branch, messages: messages.slice(0, base ?? messages.length) };
}
