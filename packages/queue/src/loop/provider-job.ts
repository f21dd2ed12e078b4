import type { Span } from '@opentelemetry/api';
import type { Job } from 'bullmq';
import { linkSpans } from '../tracing.ts';
import type { ProviderJobData } from '../jobs/jobs.ts';
import { type ProviderJobDeps, stepContext, withRoundState } from './step-context.ts';
import { failUnresolved, loadStep, resolveStep, runStopped } from './resolve-step.ts';
import { commit, readyState } from './ready-state.ts';
import { callAndRecord, prepareCall, requestSent } from './call-model.ts';
import { act, replayCopied } from './act.ts';
import { endOnGivenOutput, endStep, failedWith, givenOutput } from './end-step.ts';
import { waitForAdmission } from './provider-failure.ts';
import { reserveCall, settleRecorded } from './call-budget.ts';

export type { ProviderJobDeps } from './step-context.ts';

/**
 * Processes provider job `n` of a step: folds round `n-1` into the state (its tool jobs are this
 * settled, which is why this job exists), makes call `n` unless its response is already
 * recorded, and acts on the loop's decision: finish, fail, or fan the next round out as tool jobs
 * that enqueue provider job `n+1` once the last of them settles. Every write is idempotent, so a
 * re-delivered job is harmless.
 *
 * The life of a run is these phases, each in its own file: resolve the step (resolve-step.ts) and
 * its context (step-context.ts), make its state ready (ready-state.ts), call the model and record
 * its response with the decision taken on it (call-model.ts), act on that decision (act.ts), and
 * end the step (end-step.ts). What the job returns says where it stopped.
 */
export class ProviderJobProcessor {
  constructor(private readonly deps: ProviderJobDeps) {}

  async process(job: Job<ProviderJobData>, span: Span, token?: string): Promise<string> {
    const { deps } = this;
    const { run_id, step_id } = job.data;
    // A run's first job starts it only once its tenant has room (SPEC §14 max_active_runs); else it waits, queued.
    if (job.data.iteration === 1 && !(await deps.queues.limits.admit(run_id))) return waitForAdmission(job, token);
    const snapshot = await loadStep(deps, job, token);
    if (typeof snapshot === 'string') return snapshot;
    // A re-delivery of a call answered already: its hold is settled, whatever its worker did before dying (SPEC §14).
    if (snapshot.response) await settleRecorded(deps, job.data, snapshot.response);
    // The join: this job gathers round n-1, so it links to that round's tool spans.
    linkSpans(span, Object.values(snapshot.previousSpans));
    const stopped = await runStopped(deps, run_id, snapshot);
    if (stopped) return stopped;
    const spec = snapshot.spec!;
    const target = resolveStep(deps, spec, step_id);
    if ('error' in target) return failUnresolved(deps, run_id, step_id, target.error);
    if (target.type === 'tool') return deps.toolSteps.process(job, span, spec, target.run, target.step);
    const context = await stepContext(deps, target, snapshot, job, span);
    const given = givenOutput(context);
    if (given && context.workflow) return endOnGivenOutput(deps, context, given);

    const ready = await readyState(deps, context, snapshot);
    if (typeof ready === 'string') return ready;
    if (given) {
      // An agent run's given output: its first state is saved, so that on a thread its input and the output go onto the thread (SPEC §11).
      const state = await commit(deps, context, ready, []);
      if (!state) return 'stale';
      return endOnGivenOutput(deps, context, given, state);
    }
    if (snapshot.response) {
      // A re-delivery: the response and the plan decided on it are recorded already (never requested again).
      const state = await commit(deps, context, ready, []);
      if (!state) return 'stale';
      // A round a fork copied (SPEC §15) has every result recorded: on to the next call, nothing run.
      if (job.data.iteration <= snapshot.copiedRounds) return replayCopied(deps, withRoundState(context, state));
      await act(deps, withRoundState(context, state), state, { recorded: snapshot.response });
      return 'ok';
    }

    const call = await prepareCall(deps, context, ready, snapshot.position, job, token);
    if ('error' in call) {
      if (await commit(deps, context, ready, [])) await endStep(deps, context, failedWith(step_id, call.error, job.data.iteration));
      return call.error.error_code;
    }
    // Its worst case is held against the run's and the tenant's budgets first: a call that does not fit is not made (SPEC §14).
    const cost = await reserveCall(deps, context, call);
    if ('error' in cost) {
      if (await commit(deps, context, ready, [])) await endStep(deps, context, failedWith(step_id, cost.error, job.data.iteration));
      return cost.error.error_code;
    }
    const state = await commit(deps, context, ready, [requestSent(context, call, job)]);
    if (!state) return 'stale';
    const responded = await callAndRecord(deps, context, state, call, job, token, cost);
    if (!responded) return 'run-ended';
    return act(deps, withRoundState(context, state), state, responded);
  }
}
