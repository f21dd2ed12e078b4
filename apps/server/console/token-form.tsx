// A thread's page, for a key that may mint: an end user's token for the thread (POST /v1/tokens, SPEC §19),
// e.g. to try a browser chat against it. The server's refusal (tokens_disabled, a bad field) is shown as it says it.
import { useState } from 'preact/hooks';
import { api } from './api.ts';
import { time } from './ui.tsx';

const ACTIONS = ['read', 'send', 'cancel', 'respond'] as const;

export function TokenForm({ thread_id }: { thread_id: string }) {
  const [actions, setActions] = useState<string[]>(['read', 'send']);
  const [agents, setAgents] = useState('');
  const [subject, setSubject] = useState('');
  const [expires, setExpires] = useState('3600');
  const [minted, setMinted] = useState<{ token: string; expires_at: number } | undefined>(undefined);
  const [error, setError] = useState('');
  const toggle = (action: string) => setActions(actions.includes(action) ? actions.filter((each) => each !== action) : [...actions, action]);
  const submit = async (event: Event) => {
    event.preventDefault();
    const agentList = agents
      .split(',')
      .map((agent) => agent.trim())
      .filter((agent) => agent !== '');
    const body = {
      thread_id,
      actions: ACTIONS.filter((action) => actions.includes(action)),
      ...(agentList.length > 0 ? { agents: agentList } : {}),
      ...(subject.trim() ? { subject: subject.trim() } : {}),
      expires_in_s: Number(expires),
    };
    try {
      setMinted(await api<{ token: string; expires_at: number }>('/v1/tokens', { method: 'POST', body: JSON.stringify(body) }));
      setError('');
    } catch (failure) {
      setMinted(undefined);
      setError((failure as Error).message);
    }
  };
  return (
    <div class="card">
      <h2>Token for this thread</h2>
      <form class="token-form" onSubmit={submit as never}>
        {ACTIONS.map((action) => (
          <label>
            <input type="checkbox" name={`action-${action}`} checked={actions.includes(action)} onChange={() => toggle(action)} /> {action}
          </label>
        ))}
        <input name="agents" placeholder="agents send may enqueue (a,b)" value={agents} onInput={(event) => setAgents((event.target as HTMLInputElement).value)} />
        <input name="subject" placeholder="subject (user id)" value={subject} onInput={(event) => setSubject((event.target as HTMLInputElement).value)} />
        <input name="expires" type="number" min="1" max="86400" value={expires} onInput={(event) => setExpires((event.target as HTMLInputElement).value)} />
        <button type="submit">Mint token</button>
      </form>
      {error && <p class="error">{error}</p>}
      {minted && (
        <div>
          <p class="muted">Expires {time(minted.expires_at)}. Anyone holding it can do what it names until then.</p>
          <pre class="mono token" data-token>
            {minted.token}
          </pre>
        </div>
      )}
    </div>
  );
}
