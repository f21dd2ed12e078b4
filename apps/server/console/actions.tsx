// What a signed-in key may do to a run from its page: cancel it, and approve or reject its calls
// waiting for a person. The buttons show only for a key whose scope allows them (`write` or
// `admin`); the API checks the scope again, and a refusal shows as the problem's detail.
import { useState } from 'preact/hooks';
import { type Me, type Run, TERMINAL, api } from './api.ts';
import { WaitingCalls } from './waiting-calls.tsx';

/** A key that may change runs (SPEC §8: `write` and `admin`; `read` only looks). */
export const mayWrite = (me: Me) => me.scope === 'write' || me.scope === 'admin';

/** The run's own actions, beside its facts: cancel while it has not ended (the one run action the API has besides answering approvals). */
export function RunActions({ run, me }: { run: Run; me: Me }) {
  const [error, setError] = useState('');
  if (!mayWrite(me) || TERMINAL.has(run.status)) return null;
  const cancel = () =>
    api(`/v1/runs/${encodeURIComponent(run.run_id)}/cancel`, { method: 'POST', body: '{}' }).then(
      () => setError(''),
      (failure) => setError((failure as Error).message),
    );
  return (
    <div class="actions" data-section="actions">
      <button type="button" onClick={cancel}>
        Cancel run
      </button>
      {error && <span class="error"> {error}</span>}
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
