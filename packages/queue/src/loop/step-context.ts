import { type Agent, type StepState, type Workflow, type WorkflowStep, agentInvokedEvent, checkExecConfig, testStepFor } from '@arcflow/core';
import type { Span } from '@opentelemetry/api';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { RunSpec } from '../records/run-spec.ts';
import type { StepSnapshot } from '../steps/step-store.ts';
import type { ProviderJobData } from '../jobs/jobs.ts';
import type { ThreadStore } from '../threads/thread-store.ts';
import type { WorkflowRun, WorkflowScheduler } from '../workflows/workflow-scheduler.ts';
import type { ModelRouter } from './model-router.ts';
import type { RoundDeps, StepContext } from './round.ts';
import { roundStateOf } from './state-join.ts';

export type { StepContext } from './round.ts';

/** What a provider job needs of the worker. */
export interface ProviderJobDeps extends RoundDeps {
  readonly agents: ReadonlyMap<string, Agent>;
  readonly workflows: ReadonlyMap<string, Workflow>;
  readonly scheduler: WorkflowScheduler;
  /** Runs a workflow's tool steps (their jobs are on the workflow's provider queue too): see `ToolStepProcessor`. */
  readonly toolSteps: {
    process(job: Job<ProviderJobData>, span: Span, spec: RunSpec, run: WorkflowRun, step: Extract<WorkflowStep, { type: 'tool' }>): Promise<string>;
  };
  /** Which provider and model each try of a call goes to (SPEC §16). */
  readonly models: ModelRouter;
  /** The threads runs are on (SPEC §11). */
  readonly threads: ThreadStore;
  /** The worker's connection: a cancelled child's in-flight work is told on it. */
  readonly redis: Redis;
}

/** An agent step to run: the agent, the hash its definition is stored under, its run config, and its workflow run if any. */
export interface AgentTarget {
  readonly type: 'agent';
  readonly agent: Agent;
  readonly definition_hash: string;
  readonly config: unknown;
  readonly run: WorkflowRun | undefined;
  readonly step?: WorkflowStep;
}

/**
 * The step as this job sees it. A deploy that changed the agent (or workflow) since the run was
 * enqueued lets the run go on, and says so once per change (`DefinitionChanged`).
 */
export async function stepContext(deps: ProviderJobDeps, target: AgentTarget, snapshot: StepSnapshot, job: Job<ProviderJobData>, span: Span): Promise<StepContext> {
  const spec = snapshot.spec!;
  const { run_id, step_id, iteration } = job.data;
  const { agent, definition_hash } = target;
  if (spec.definition_hash !== '' && spec.definition_hash !== definition_hash) {
    const changed = { kind: 'DefinitionChanged', step_id, iteration, previous_hash: spec.definition_hash, current_hash: definition_hash } as const;
    await deps.store.append(run_id, [{ event: changed, once: `definition|${spec.definition_hash}|${definition_hash}` }]);
  }
  return {
    spec,
    agent,
    workflow: target.run,
    settings: agent.settingsFor(target.config),
    test: testStepFor(checkExecConfig(spec.exec_config), step_id),
    data: job.data,
    span,
    spent: snapshot.spent,
  };
}

/** The context with the run state the round it opens starts from (SPEC §17). */
export function withRoundState(context: StepContext, state: StepState): StepContext {
  return { ...context, round: roundStateOf(state, context.agent.max_state_bytes) };
}

/** The step's `AgentInvoked`, once per step. */
export function invokedEvent(context: StepContext) {
  const { step_id } = context.data;
  return { event: agentInvokedEvent(context.agent, context.settings, step_id), once: `invoked|${step_id}` };
}
