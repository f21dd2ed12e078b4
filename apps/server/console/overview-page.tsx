// The overview: runs started and ended per bucket by status, run durations (p50/p95), tokens and
// cost per agent, and queue depths, over the last hour or day (GET /v1/overview).
import { useState } from 'preact/hooks';
import type { Overview } from '../src/overview-shape.ts';
import { api } from './api.ts';
import { Legend, Lines, NamedBars, type Series, StackedBars } from './charts.tsx';
import { usePolled } from './hooks.ts';

const ENDED: Series[] = [
  { key: 'completed', label: 'completed', tone: 'completed' },
  { key: 'failed', label: 'failed', tone: 'failed' },
  { key: 'cancelled', label: 'cancelled', tone: 'cancelled' },
];
const STARTED: Series = { key: 'started', label: 'started', tone: 'started' };
const DURATIONS: Series[] = [
  { key: 'p50_ms', label: 'p50', tone: 'p50' },
  { key: 'p95_ms', label: 'p95', tone: 'p95' },
];
const DEPTHS: Series[] = [
  { key: 'waiting', label: 'waiting', tone: 'waiting' },
  { key: 'active', label: 'active', tone: 'running' },
  { key: 'delayed', label: 'delayed', tone: 'retried' },
];

export function OverviewPage() {
  const [range, setRange] = useState<'hour' | 'day'>('hour');
  const overview = usePolled(() => api<Overview>(`/v1/overview?window=${range}`), 10_000, [range]);
  const data = overview.value?.window === range ? overview.value : undefined;
  return (
    <div>
      <div class="card">
        <h2>Overview</h2>
        <div class="filters">
          {(['hour', 'day'] as const).map((each) => (
            <button type="button" class={each === range ? 'primary' : ''} aria-pressed={each === range} onClick={() => setRange(each)}>
              last {each}
            </button>
          ))}
        </div>
        {overview.error && <p class="error">{overview.error}</p>}
        {data && <Totals data={data} />}
        {data?.truncated && <p class="muted">Ends, durations and tokens cover the newest {data.runs_read} runs of the window.</p>}
      </div>
      {data && <Charts data={data} per={range === 'hour' ? 'minute' : '15 minutes'} />}
    </div>
  );
}

/** The window's totals: runs started and ended, durations, tokens. */
function Totals({ data }: { data: Overview }) {
  return (
    <div class="facts" data-section="totals">
      <div>
        <span>runs started</span>
        {data.runs_in_window}
      </div>
      <div>
        <span>runs ended</span>
        {data.duration_ms.runs}
      </div>
      <div>
        <span>duration p50 / p95</span>
        {ms(data.duration_ms.p50)} / {ms(data.duration_ms.p95)}
      </div>
      <div>
        <span>tokens</span>
        {data.agents.reduce((sum, agent) => sum + agent.tokens.total, 0)}
      </div>
    </div>
  );
}

/** Runs per bucket, run durations, tokens per agent and queue depths. */
function Charts({ data, per }: { data: Overview; per: string }) {
  return (
    <div class="charts">
      <div class="card">
        <h2>Runs per {per}</h2>
        <StackedBars name="runs" points={data.buckets} series={ENDED} line={STARTED} />
        <Legend series={[...ENDED, STARTED]} />
      </div>
      <div class="card">
        <h2>Run duration</h2>
        <Lines name="duration" points={data.buckets} unit=" ms" series={DURATIONS} />
        <Legend series={DURATIONS} />
      </div>
      <div class="card">
        <h2>Tokens per agent</h2>
        {data.agents.length === 0 ? <p class="muted">No run ended in this window.</p> : <AgentTokens agents={data.agents} />}
      </div>
      <div class="card">
        <h2>Queue depth</h2>
        <StackedBars name="queues" points={data.buckets} series={DEPTHS} />
        <Legend series={DEPTHS} note="sampled once a minute while an overview is open" />
        {data.queues.length > 0 ? <QueuesNow queues={data.queues} /> : <p class="muted">Every queue is empty now.</p>}
      </div>
    </div>
  );
}

/** Tokens per agent or workflow, with its runs and cost. */
function AgentTokens({ agents }: { agents: Overview['agents'] }) {
  return (
    <NamedBars
      name="tokens"
      rows={agents.map((agent) => ({
        key: `${agent.kind}:${agent.name}`,
        label: agent.kind === 'workflow' ? `${agent.name} (workflow)` : agent.name,
        value: agent.tokens.total,
        note: `${agent.runs} run${agent.runs === 1 ? '' : 's'}${agent.cost_usd !== undefined ? ` · $${agent.cost_usd.toFixed(4)}` : ''}`,
      }))}
    />
  );
}

/** Each queue's depth now. */
function QueuesNow({ queues }: { queues: Overview['queues'] }) {
  return (
    <table>
      <thead>
        <tr>
          <th>queue now</th>
          <th>waiting</th>
          <th>active</th>
          <th>delayed</th>
        </tr>
      </thead>
      <tbody>
        {queues.map((queue) => (
          <tr data-queue={queue.name}>
            <td class="mono">{queue.name}</td>
            <td>{queue.waiting}</td>
            <td>{queue.active}</td>
            <td>{queue.delayed}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ms(value: number | null): string {
  return value === null ? '—' : `${value} ms`;
}
