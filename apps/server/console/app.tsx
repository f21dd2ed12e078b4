// The arcflow console: a small Preact app over the HTTP API, bundled at package time.
import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';

interface Me {
  name: string;
  scope: string;
  open: boolean;
  trace_url: string | null;
}
interface Tokens {
  input: number;
  output: number;
  total: number;
}
interface RunError {
  code: string;
  error_code: string;
  message: string;
}
interface Run {
  run_id: string;
  status: string;
  agent?: string;
  workflow?: string;
  output?: string;
  error?: RunError;
  usage: Tokens;
  iterations: number;
  created_at: number;
  finished_at?: number;
  trace_id?: string;
  steps?: Record<string, { status: string; output?: string; error?: RunError }>;
  pending_approvals?: { step_id: string; iteration: number; tool_call_id: string; tool_name: string; arguments: unknown; requested_at: number; expires_at: number }[];
}
interface Event {
  seq: number;
  kind: string;
  step_id: string;
  ts: number;
  iteration?: number;
  [field: string]: unknown;
}
interface AgentInfo {
  name: string;
  kind: 'agent' | 'workflow';
  tools: string[];
  live_workers: number;
  steps?: { id: string; type: string; depends_on: string[] }[];
}
interface QueueInfo {
  name: string;
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
  workers: number;
}

class Problem extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function api<T>(path: string, init?: RequestInit): Promise<T> {
  const response = await fetch(path, { credentials: 'same-origin', headers: { 'content-type': 'application/json' }, ...init });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Problem(response.status, (body as { detail?: string }).detail ?? response.statusText);
  return body as T;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** Calls `load` now and every `ms` until `stop` says so; returns its latest value and error. */
function usePolled<T>(load: () => Promise<T>, ms: number, deps: unknown[], stop?: (value: T) => boolean): { value?: T; error?: string } {
  const [state, setState] = useState<{ value?: T; error?: string }>({});
  useEffect(() => {
    let live = true;
    let timer: number | undefined;
    const tick = async () => {
      try {
        const value = await load();
        if (!live) return;
        setState({ value });
        if (stop?.(value)) return;
      } catch (error) {
        if (live) setState((previous) => ({ ...previous, error: (error as Error).message }));
      }
      if (live) timer = window.setTimeout(tick, ms);
    };
    tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, deps);
  return state;
}

function useRoute(): string {
  const [hash, setHash] = useState(location.hash || '#/runs');
  useEffect(() => {
    const onChange = () => setHash(location.hash || '#/runs');
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return hash;
}

const duration = (run: Run) => (run.finished_at ? `${run.finished_at - run.created_at} ms` : '…');
const time = (ms: number) => new Date(ms).toLocaleTimeString();
const Badge = ({ status }: { status: string }) => <span class={`badge ${status}`}>{status}</span>;

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
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

function RunsList() {
  const [status, setStatus] = useState('');
  const [agent, setAgent] = useState('');
  const agents = usePolled(() => api<{ agents: AgentInfo[] }>('/v1/agents'), 10_000, []);
  const query = new URLSearchParams({ limit: '50', ...(status ? { status } : {}), ...(agent ? { agent } : {}) });
  const runs = usePolled(() => api<{ runs: Run[] }>(`/v1/runs?${query}`), 1_000, [status, agent]);
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
      </div>
      {runs.error && <p class="error">{runs.error}</p>}
      <table>
        <thead>
          <tr>
            <th>run</th>
            <th>status</th>
            <th>agent</th>
            <th class="hide-narrow">created</th>
            <th>duration</th>
            <th class="hide-narrow">tokens</th>
          </tr>
        </thead>
        <tbody>
          {(runs.value?.runs ?? []).map((run) => (
            <tr data-run={run.run_id}>
              <td class="id">
                <a href={`#/runs/${run.run_id}`}>{run.run_id}</a>
              </td>
              <td>
                <Badge status={run.status} />
              </td>
              <td>{run.workflow ? `${run.workflow} (workflow)` : run.agent}</td>
              <td class="hide-narrow">{time(run.created_at)}</td>
              <td>{duration(run)}</td>
              <td class="hide-narrow">{run.usage.total}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {runs.value && runs.value.runs.length === 0 && <p class="muted">No runs yet.</p>}
    </div>
  );
}

/** The run's events, live: the stream resumes by itself after a dropped connection (Last-Event-ID). */
function useEvents(run_id: string): Event[] {
  const [events, setEvents] = useState<Event[]>([]);
  useEffect(() => {
    setEvents([]);
    const source = new EventSource(`/v1/runs/${encodeURIComponent(run_id)}/events`);
    const seen = new Set<number>();
    source.onmessage = () => undefined;
    const onEvent = (message: MessageEvent) => {
      const event = JSON.parse(message.data) as Event;
      if (seen.has(event.seq)) return;
      seen.add(event.seq);
      setEvents((previous) => [...previous, event]);
      if (['RunCompleted', 'RunFailed', 'RunCancelled'].includes(event.kind)) source.close();
    };
    for (const kind of KINDS) source.addEventListener(kind, onEvent as EventListener);
    return () => source.close();
  }, [run_id]);
  return events;
}

const KINDS = [
  'RunEnqueued',
  'AgentInvoked',
  'ProviderRequestSent',
  'ProviderResponseReceived',
  'TokensConsumed',
  'ProviderRateLimited',
  'ProviderError',
  'ToolCallStarted',
  'ToolInputValidationFailed',
  'ToolCallCompleted',
  'ToolCallFailed',
  'LoopDetected',
  'AgentResponseReceived',
  'StepExecutionFailed',
  'StepStarted',
  'StepCompleted',
  'StepSkipped',
  'RunCompleted',
  'RunFailed',
  'RunCancelled',
  'DefinitionChanged',
  'ToolApprovalRequested',
  'ToolApprovalResolved',
];

interface CallView {
  id: string;
  name: string;
  outcome: string;
  detail: string;
  attempts: number;
}
interface StepView {
  id: string;
  tokens?: Tokens;
  outcome?: string;
  iterations: Map<number, { chat: string; calls: Map<string, CallView> }>;
}

/** Steps, iterations and calls, folded from the events (as `arcflow inspect` does). */
function fold(events: Event[]): StepView[] {
  const steps = new Map<string, StepView>();
  const step = (id: string) => {
    let view = steps.get(id);
    if (!view) {
      view = { id, iterations: new Map() };
      steps.set(id, view);
    }
    return view;
  };
  const iteration = (event: Event) => {
    const view = step(event.step_id);
    const n = event.iteration ?? 1;
    let node = view.iterations.get(n);
    if (!node) {
      node = { chat: '', calls: new Map() };
      view.iterations.set(n, node);
    }
    return node;
  };
  const call = (event: Event) => {
    const node = iteration(event);
    const id = String(event.tool_call_id);
    let view = node.calls.get(id);
    if (!view) {
      view = { id, name: String(event.tool_name), outcome: 'running', detail: '', attempts: 0 };
      node.calls.set(id, view);
    }
    return view;
  };
  for (const event of events) {
    if (event.step_id === 'run') continue;
    switch (event.kind) {
      case 'ProviderResponseReceived':
        iteration(event).chat = `${event.model_id} · ${event.latency_ms} ms · ${(event.tokens as Tokens).total} tokens · ${event.tool_calls_count} call(s)`;
        break;
      case 'TokensConsumed':
        step(event.step_id).tokens = event.cumulative as Tokens;
        break;
      case 'ToolCallStarted':
        call(event).attempts = Math.max(call(event).attempts, Number(event.attempt));
        break;
      case 'ToolCallCompleted':
        Object.assign(call(event), { outcome: 'completed', detail: `${event.duration_ms} ms · ${event.output_size_bytes} B` });
        break;
      case 'ToolCallFailed':
        Object.assign(call(event), { outcome: `failed (${event.error_code})`, detail: `${event.duration_ms} ms` });
        break;
      case 'ToolInputValidationFailed':
        Object.assign(call(event), { outcome: 'invalid input', detail: String(event.violation_description) });
        break;
      case 'LoopDetected':
        Object.assign(call(event), { outcome: 'loop detected', detail: `${event.repeats} repeats` });
        break;
      case 'StepCompleted':
        step(event.step_id).outcome = `${event.duration_ms} ms · ${event.output_size_bytes} B out`;
        break;
      case 'StepExecutionFailed':
        step(event.step_id).outcome = `${event.error_code}: ${event.message}`;
        break;
      default:
        step(event.step_id);
    }
  }
  return [...steps.values()];
}

/** A workflow's steps in layers: each after the layer of its last dependency. */
function layers(steps: { id: string; depends_on: string[] }[]): { id: string; depends_on: string[] }[][] {
  const depth = new Map<string, number>();
  const depthOf = (id: string): number => {
    if (depth.has(id)) return depth.get(id)!;
    const step = steps.find((each) => each.id === id);
    const value = step && step.depends_on.length > 0 ? 1 + Math.max(...step.depends_on.map(depthOf)) : 0;
    depth.set(id, value);
    return value;
  };
  const result: { id: string; depends_on: string[] }[][] = [];
  for (const step of steps) {
    const at = depthOf(step.id);
    result[at] = [...(result[at] ?? []), step];
  }
  return result;
}

function RunPage({ run_id, me }: { run_id: string; me: Me }) {
  const record = usePolled(
    () => api<Run>(`/v1/runs/${encodeURIComponent(run_id)}`),
    1_500,
    [run_id],
    (run) => TERMINAL.has(run.status),
  );
  const agents = usePolled(() => api<{ agents: AgentInfo[] }>('/v1/agents'), 60_000, []);
  const events = useEvents(run_id);
  const views = useMemo(() => fold(events), [events]);
  const run = record.value;
  if (record.error && !run) return <p class="error">{record.error}</p>;
  if (!run) return <p class="muted">Loading…</p>;
  const graph = run.workflow ? agents.value?.agents.find((each) => each.name === run.workflow)?.steps : undefined;
  const traceLink = run.trace_id && me.trace_url ? me.trace_url.replace('{trace_id}', run.trace_id) : undefined;
  const cancel = () => api(`/v1/runs/${encodeURIComponent(run_id)}/cancel`, { method: 'POST', body: '{}' }).catch(() => undefined);
  return (
    <div>
      <div class="card">
        <h2 class="mono">{run.run_id}</h2>
        <div class="facts">
          <div>
            <span>status</span>
            <Badge status={run.status} />
          </div>
          <div>
            <span>{run.workflow ? 'workflow' : 'agent'}</span>
            {run.workflow ?? run.agent}
          </div>
          <div>
            <span>duration</span>
            {duration(run)}
          </div>
          <div>
            <span>iterations</span>
            {run.iterations}
          </div>
          <div>
            <span>tokens (in / out / total)</span>
            {run.usage.input} / {run.usage.output} / {run.usage.total}
          </div>
          <div>
            <span>trace</span>
            {traceLink ? <a href={traceLink}>{run.trace_id}</a> : <span class="mono">{run.trace_id ?? '—'}</span>}
          </div>
        </div>
        {run.error && (
          <p class="error">
            {run.error.error_code}: {run.error.message}
          </p>
        )}
        {run.output !== undefined && <p class="mono">{run.output}</p>}
        {!TERMINAL.has(run.status) && me.scope !== 'read' && (
          <button type="button" onClick={cancel}>
            Cancel run
          </button>
        )}
      </div>
      {(run.pending_approvals?.length ?? 0) > 0 && <PendingApprovals run={run} canAnswer={me.scope !== 'read'} />}
      {graph && (
        <div class="card">
          <h2>Workflow</h2>
          <div class="graph">
            {layers(graph).map((layer) => (
              <div class="layer">
                {layer.map((step) => (
                  <div class="node" data-step={step.id}>
                    <strong>{step.id}</strong> <Badge status={run.steps?.[step.id]?.status ?? 'pending'} />
                    {step.depends_on.length > 0 && <div class="after">after {step.depends_on.join(', ')}</div>}
                  </div>
                ))}
              </div>
            ))}
          </div>
        </div>
      )}
      <div class="card">
        <h2>Steps and tool calls</h2>
        {views.map((view) => (
          <div class="step" data-step-view={view.id}>
            <h3>
              step {view.id} {run.steps?.[view.id] && <Badge status={run.steps[view.id]!.status} />}
              <span class="muted">{view.outcome}</span>
              {view.tokens && <span class="muted">{view.tokens.total} tokens</span>}
            </h3>
            {[...view.iterations.entries()].map(([n, node]) => (
              <div class="iteration">
                <p>{node.chat ? `iteration ${n} · ${node.chat}` : 'call'}</p>
                {node.calls.size > 0 && (
                  <table>
                    <tbody>
                      {[...node.calls.values()].map((call) => (
                        <tr data-call={call.id}>
                          <td>{call.name}</td>
                          <td class="mono hide-narrow">{call.id}</td>
                          <td>{call.outcome}</td>
                          <td>{call.detail}</td>
                          <td class="hide-narrow">{call.attempts > 1 ? `${call.attempts} attempts` : ''}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                )}
              </div>
            ))}
          </div>
        ))}
      </div>
      <div class="card">
        <h2>Events ({events.length})</h2>
        <div class="events">
          <table>
            <tbody>
              {events.map((event) => (
                <tr data-seq={event.seq}>
                  <td>{event.seq}</td>
                  <td>{event.kind}</td>
                  <td class="mono">
                    {event.step_id}
                    {event.iteration ? `#${event.iteration}` : ''}
                  </td>
                  <td class="hide-narrow">{time(event.ts)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </div>
    </div>
  );
}

/** Calls waiting for a person, with their arguments; keys that may write approve or reject them here. */
function PendingApprovals({ run, canAnswer }: { run: Run; canAnswer: boolean }) {
  const [reasons, setReasons] = useState<Record<string, string>>({});
  const [error, setError] = useState('');
  const answer = (id: string, approved: boolean) =>
    api(`/v1/runs/${encodeURIComponent(run.run_id)}/approvals/${encodeURIComponent(id)}`, {
      method: 'POST',
      body: JSON.stringify({ approved, ...(!approved && reasons[id] ? { reason: reasons[id] } : {}) }),
    }).catch((failure) => setError((failure as Error).message));
  return (
    <div class="card">
      <h2>Waiting for approval</h2>
      {error && <p class="error">{error}</p>}
      <table>
        <tbody>
          {(run.pending_approvals ?? []).map((call) => (
            <tr data-approval={call.tool_call_id}>
              <td>{call.tool_name}</td>
              <td class="mono">{JSON.stringify(call.arguments)}</td>
              <td class="hide-narrow">until {time(call.expires_at)}</td>
              {canAnswer && (
                <td>
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
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Agents() {
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

function Queues() {
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

function App() {
  const route = useRoute();
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const load = () =>
    api<Me>('/console/me').then(setMe, (error) => {
      if ((error as Problem).status === 401) setMe(null);
    });
  useEffect(() => {
    load();
  }, []);
  if (me === undefined) return <p class="muted">Loading…</p>;
  if (me === null) return <SignIn onSignedIn={load} />;
  const signOut = async () => {
    await api('/console/session', { method: 'DELETE' });
    setMe(null);
  };
  const runMatch = /^#\/runs\/(.+)$/.exec(route);
  const tab = (href: string, label: string) => (
    <a href={href} class={route.startsWith(href) ? 'on' : ''}>
      {label}
    </a>
  );
  return (
    <div>
      <header>
        <strong>arcflow</strong>
        <nav>
          {tab('#/runs', 'Runs')}
          {tab('#/agents', 'Agents')}
          {tab('#/queues', 'Queues')}
        </nav>
        <span class="who">
          {me.name} ({me.scope})
          {!me.open && (
            <button type="button" onClick={signOut}>
              Sign out
            </button>
          )}
        </span>
      </header>
      <main>
        {runMatch ? (
          <RunPage run_id={decodeURIComponent(runMatch[1]!)} me={me} />
        ) : route.startsWith('#/agents') ? (
          <Agents />
        ) : route.startsWith('#/queues') ? (
          <Queues />
        ) : (
          <RunsList />
        )}
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
