// What a signed-in key may do to a run from its page: cancel it, retry it, fork it from an
// iteration, and approve or reject its calls waiting for a person; and on the runs page, retry or
// cancel every run a filter matches. The buttons show only for a key whose scope allows them
// (`write` or `admin`; bulk actions `admin`); the API checks the scope again, and a refusal shows as
// the problem's detail.
import { useState } from 'preact/hooks';
import { type Me, type Run, TERMINAL, api } from './api.ts';
import { WaitingCalls } from './waiting-calls.tsx';

/** A key that may change runs (SPEC §8: `write` and `admin`; `read` only looks). */
export const mayWrite = (me: Me) => me.scope === 'write' || me.scope === 'admin';

/** A key that may act on many runs at once (SPEC §15: bulk actions need `admin`). */
export const mayBulk = (me: Me) => me.scope === 'admin';

/** Opens a run's page. */
const openRun = (run_id: string) => {
  location.hash = `#/runs/${encodeURIComponent(run_id)}`;
};

/**
 * The run's own actions, beside its facts: cancel while it has not ended; retry a failed or
 * cancelled run (once: then a link to its retry); fork it from an iteration (SPEC §15). Where it
 * was forked from is shown to every key.
 */
export function RunActions({ run, me }: { run: Run; me: Me }) {
  const [error, setError] = useState('');
  // The run's last iteration until one is typed (the run may still be going when the page opens).
  const [typed, setIteration] = useState<string | undefined>(undefined);
  const iteration = typed ?? String(Math.max(1, run.iterations));
  const post = (action: string, body: unknown, then: (answer: { run_id: string }) => void = () => setError('')) =>
    api<{ run_id: string }>(`/v1/runs/${encodeURIComponent(run.run_id)}/${action}`, { method: 'POST', body: JSON.stringify(body) }).then(then, (failure) =>
      setError((failure as Error).message),
    );
  const writes = mayWrite(me);
  const ended = TERMINAL.has(run.status);
  const retriable = run.status === 'failed' || run.status === 'cancelled';
  return (
    <div class="actions" data-section="actions">
      {run.forked_from && (
        <span class="muted" data-forked-from={run.forked_from.run_id}>
          forked from <a href={`#/runs/${encodeURIComponent(run.forked_from.run_id)}`}>{run.forked_from.run_id}</a> at iteration {run.forked_from.iteration}{' '}
        </span>
      )}
      {run.retried_by && (
        <span class="muted" data-retried-by={run.retried_by}>
          retried by <a href={`#/runs/${encodeURIComponent(run.retried_by)}`}>{run.retried_by}</a>{' '}
        </span>
      )}
      {writes && !ended && (
        <button type="button" onClick={() => post('cancel', {})}>
          Cancel run
        </button>
      )}
      {writes && retriable && !run.retried_by && (
        <button type="button" onClick={() => post('retry', {}, (answer) => openRun(answer.run_id))}>
          Retry
        </button>
      )}
      {writes && ended && !run.workflow && (
        <span>
          {' '}
          <input aria-label="fork iteration" type="number" min="1" value={iteration} onInput={(event) => setIteration((event.target as HTMLInputElement).value)} />{' '}
          <button type="button" onClick={() => post('fork', { from: { iteration: Number(iteration) } }, (answer) => openRun(answer.run_id))}>
            Fork from iteration
          </button>
        </span>
      )}
      {error && <span class="error"> {error}</span>}
    </div>
  );
}

/** Retry or cancel every run of a status (and the listing's agent), with a dry run first: admin keys only. */
export function BulkActions({ status, agent }: { status: string; agent: string }) {
  const [outcome, setOutcome] = useState('');
  const act = (action: 'retry' | 'cancel', dry_run: boolean) =>
    api<{ matched: number; acted: number; run_ids: string[] }>('/v1/runs/bulk', {
      method: 'POST',
      body: JSON.stringify({ action, filter: { status, ...(agent ? { agent } : {}) }, dry_run }),
    }).then(
      (done) =>
        setOutcome(
          dry_run
            ? `${done.matched} match; ${action} would act on ${done.run_ids.length}`
            : `${done.matched} matched; ${action === 'retry' ? 'retried' : 'cancelled'} ${done.acted}`,
        ),
      (failure) => setOutcome((failure as Error).message),
    );
  if (!status) return <p class="muted">Choose a status to retry or cancel every run of it.</p>;
  return (
    <div class="actions" data-section="bulk">
      {(['retry', 'cancel'] as const).map((action) => (
        <span>
          <button type="button" onClick={() => act(action, true)}>
            {action === 'retry' ? 'Retry' : 'Cancel'} all {status}: dry run
          </button>{' '}
          <button type="button" onClick={() => act(action, false)}>
            {action === 'retry' ? 'Retry' : 'Cancel'} all {status}
          </button>{' '}
        </span>
      ))}
      {outcome && <span data-bulk-outcome>{outcome}</span>}
    </div>
  );
}

/** Calls waiting for a person, with their arguments; keys that may write approve or reject them here. */
export function PendingApprovals({ run, me }: { run: Run; me: Me }) {
  const [reasons, setReasons] = useState<Record<string, string>>({});
  const [error, setError] = useState('');
  const answer = (id: string, approved: boolean) =>
    api(`/v1/runs/${encodeURIComponent(run.run_id)}/approvals/${encodeURIComponent(id)}`, {
      method: 'POST',
      body: JSON.stringify({ approved, ...(!approved && reasons[id] ? { reason: reasons[id] } : {}) }),
    }).catch((failure) => setError((failure as Error).message));
  const actions = (call: { tool_call_id: string }) => (
    <>
      <button type="button" class="primary" onClick={() => answer(call.tool_call_id, true)}>
        Approve
      </button>{' '}
      <input
        aria-label="reason"
        placeholder="reason"
        value={reasons[call.tool_call_id] ?? ''}
        onInput={(event) => setReasons({ ...reasons, [call.tool_call_id]: (event.target as HTMLInputElement).value })}
      />{' '}
      <button type="button" onClick={() => answer(call.tool_call_id, false)}>
        Reject
      </button>
    </>
  );
  return <WaitingCalls title="Waiting for approval" calls={run.pending_approvals ?? []} row="data-approval" error={error} {...(mayWrite(me) ? { actions } : {})} />;
}
