// Calls of a run waiting for a result from outside (SPEC §20): their arguments, and (for a key that
// may write) a form that answers one with an output (JSON) or an error.
import { useState } from 'preact/hooks';
import { type Run, api } from './api.ts';
import { WaitingCalls } from './waiting-calls.tsx';

export function PendingResults({ run, canAnswer }: { run: Run; canAnswer: boolean }) {
  const [drafts, setDrafts] = useState<Record<string, string>>({});
  const [error, setError] = useState('');
  const answer = (id: string, as: 'output' | 'error') => {
    const draft = drafts[id] ?? '';
    let body: { output: unknown } | { error: string };
    if (as === 'error') body = { error: draft || 'refused from the console' };
    else {
      try {
        body = { output: JSON.parse(draft) };
      } catch {
        setError('the output must be JSON (a string in quotes)');
        return;
      }
    }
    setError('');
    api(`/v1/runs/${encodeURIComponent(run.run_id)}/tool-results/${encodeURIComponent(id)}`, { method: 'POST', body: JSON.stringify(body) }).catch((failure) =>
      setError((failure as Error).message),
    );
  };
  const actions = (call: { tool_call_id: string }) => (
    <>
      <input
        aria-label="result"
        placeholder='output as JSON, e.g. {"city":"Oslo"}'
        value={drafts[call.tool_call_id] ?? ''}
        onInput={(event) => setDrafts({ ...drafts, [call.tool_call_id]: (event.target as HTMLInputElement).value })}
      />{' '}
      <button type="button" class="primary" onClick={() => answer(call.tool_call_id, 'output')}>
        Answer
      </button>{' '}
      <button type="button" onClick={() => answer(call.tool_call_id, 'error')}>
        Fail
      </button>
    </>
  );
  return <WaitingCalls title="Waiting for a result" calls={run.pending_tool_results ?? []} row="data-result" error={error} {...(canAnswer ? { actions } : {})} />;
}
