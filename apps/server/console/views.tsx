// The console's pages: sign-in, runs, agents, queues.
import { useState } from 'preact/hooks';
import { BulkActions, mayBulk } from './actions.tsx';
import { type AgentInfo, type Me, type QueueInfo, type Run, type TenantStanding, api } from './api.ts';
import { usePolled } from './hooks.ts';
import { Badge, duration, time } from './ui.tsx';

export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState('');
  const submit = async (event: Event | SubmitEvent) => {
    (event as SubmitEvent).preventDefault();
    try {
      await api('/console/session', { method: 'POST', body: JSON.stringify({ key }) });
      onSignedIn();
    } catch (failure) {
      setError((failure as Error).message);
    }
  };
  return (
    <div class="card signin">
      <h2>Sign in to arcflow</h2>
      <form onSubmit={submit as never}>
        <input type="password" name="key" placeholder="API key" autocomplete="current-password" value={key} onInput={(event) => setKey((event.target as HTMLInputElement).value)} />
        <button class="primary" type="submit">
          Sign in
        </button>
        {error && <p class="error">{error}</p>}
      </form>
    </div>
  );
}

export function RunsList({ me }: { me?: Me }) {
  const [status, setStatus] = useState('');
  const [agent, setAgent] = useState('');
  const [tenant, setTenant] = useState('');
  const agents = usePolled(() => api<{ agents: AgentInfo[] }>('/v1/agents'), 10_000, []);
  const query = new URLSearchParams({ limit: '50', ...(status ? { status } : {}), ...(agent ? { agent } : {}), ...(tenant ? { tenant } : {}) });
  const runs = usePolled(() => api<{ runs: Run[]; next_cursor?: string }>(`/v1/runs?${query}`), 1_000, [status, agent, tenant]);
  return (
    <div class="card">
      <h2>Runs</h2>
      <div class="filters">
        <select aria-label="status" value={status} onChange={(event) => setStatus((event.target as HTMLSelectElement).value)}>
          <option value="">any status</option>
          {['queued', 'running', 'waiting', 'completed', 'failed', 'cancelled'].map((each) => (
            <option value={each}>{each}</option>
          ))}
        </select>
        <select aria-label="agent" value={agent} onChange={(event) => setAgent((event.target as HTMLSelectElement).value)}>
          <option value="">any agent or workflow</option>
          {(agents.value?.agents ?? []).map((each) => (
            <option value={each.name}>{each.name}</option>
          ))}
        </select>
        <input aria-label="tenant" placeholder="any tenant" value={tenant} onInput={(event) => setTenant((event.target as HTMLInputElement).value.trim())} />
      </div>
      {TENANT_NAME.test(tenant) && <TenantLine tenant={tenant} />}
      {me && mayBulk(me) && <BulkActions status={status} agent={agent} />}
      {runs.error && <p class="error">{runs.error}</p>}
      <RunsTable runs={runs.value?.runs ?? []} />
      {runs.value && runs.value.runs.length === 0 && <p class="muted">{emptyListing(runs.value.next_cursor !== undefined, Boolean(status || agent || tenant))}</p>}
    </div>
  );
}

/** What an empty page of runs says: none at all, none matching, or none matching among the newest (a listing reads so many at a time). */
function emptyListing(more: boolean, filtered: boolean): string {
  if (more) return 'No match among the newest runs; older runs were not read.';
  return filtered ? 'No run matches.' : 'No runs yet.';
}

/** The names `GET /v1/tenants/{tenant}` takes (SPEC §14). */
const TENANT_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;

/** The tenant the list is filtered to: its runs started and waiting to start, and its spend today (UTC). */
function TenantLine({ tenant }: { tenant: string }) {
  const standing = usePolled(() => api<TenantStanding>(`/v1/tenants/${encodeURIComponent(tenant)}`), 2_000, [tenant]);
  if (!standing.value) return null;
  const { active_runs, queued_runs, cost_usd_today } = standing.value;
  return (
    <p class="tenant-standing muted" data-tenant={tenant}>
      {tenant}: {active_runs} active, {queued_runs} queued, ${cost_usd_today.toFixed(cost_usd_today < 1 ? 4 : 2)} spent today (UTC)
    </p>
  );
}

/** Runs, a row each: id (and the run it was steered into), status, agent or workflow, tenant, start, duration, tokens. */
export function RunsTable({ runs }: { runs: readonly Run[] }) {
  return (
    <table>
      <thead>
        <tr>
          <th>run</th>
          <th>status</th>
          <th>agent</th>
          <th class="hide-narrow">tenant</th>
          <th class="hide-narrow">created</th>
          <th>duration</th>
          <th class="hide-narrow">tokens</th>
        </tr>
      </thead>
      <tbody>
        {runs.map((run) => (
          <tr data-run={run.run_id}>
            <td class="id">
              <a href={`#/runs/${encodeURIComponent(run.run_id)}`}>{run.run_id}</a>
              {run.steered_into && <span class="muted"> steered into {run.steered_into}</span>}
            </td>
            <td>
              <Badge status={run.status} />
            </td>
            <td>{run.workflow ? `${run.workflow} (workflow)` : run.agent}</td>
            <td class="hide-narrow tenant">{run.tenant ?? 'default'}</td>
            <td class="hide-narrow">{time(run.created_at)}</td>
            <td>{duration(run)}</td>
            <td class="hide-narrow">{run.usage.total}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The run's events, live: the stream resumes by itself after a dropped connection (Last-Event-ID). */

export function Agents() {
  const agents = usePolled(() => api<{ agents: AgentInfo[] }>('/v1/agents'), 5_000, []);
  return (
    <div class="card">
      <h2>Agents and workflows</h2>
      {agents.error && <p class="error">{agents.error}</p>}
      <table>
        <thead>
          <tr>
            <th>name</th>
            <th>kind</th>
            <th>tools</th>
            <th>live workers</th>
          </tr>
        </thead>
        <tbody>
          {(agents.value?.agents ?? []).map((agent) => (
            <tr>
              <td>{agent.name}</td>
              <td>{agent.kind}</td>
              <td>{agent.tools.join(', ')}</td>
              <td>{agent.live_workers}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Queues() {
  const queues = usePolled(() => api<{ queues: QueueInfo[] }>('/v1/queues'), 2_000, []);
  return (
    <div class="card">
      <h2>Queues</h2>
      {queues.error && <p class="error">{queues.error}</p>}
      <table>
        <thead>
          <tr>
            <th>queue</th>
            <th>waiting</th>
            <th>active</th>
            <th>delayed</th>
            <th>failed</th>
            <th>workers</th>
          </tr>
        </thead>
        <tbody>
          {(queues.value?.queues ?? []).map((queue) => (
            <tr>
              <td>{queue.name}</td>
              <td>{queue.waiting}</td>
              <td>{queue.active}</td>
              <td>{queue.delayed}</td>
              <td>{queue.failed}</td>
              <td>{queue.workers}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
