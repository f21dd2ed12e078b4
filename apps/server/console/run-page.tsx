// A run's page: its facts (a child run's parent among them) and actions, calls waiting for an approval or a result, workflow graph, timeline, state, steps with their calls, the model's text as it streams, and events, live.
import { useMemo } from 'preact/hooks';
import { type AgentInfo, type Event, type Me, type Run, TERMINAL, api } from './api.ts';
import { PendingApprovals, RunActions, mayWrite } from './actions.tsx';
import { type StateRound, type CallView, type StepView, fold, stateRounds } from './fold.ts';
import { WorkflowGraph } from './graph.tsx';
import { type StreamedText, useEvents, usePolled, useRunText } from './hooks.ts';
import { PendingResults } from './pending-results.tsx';
import { TimelineChart } from './timeline-view.tsx';
import { Badge, RunLink, duration, time } from './ui.tsx';

export function RunPage({ run_id, me }: { run_id: string; me: Me }) {
  const record = usePolled(
    () => api<Run>(`/v1/runs/${encodeURIComponent(run_id)}`),
    1_500,
    [run_id],
    (run) => TERMINAL.has(run.status),
  );
  const agents = usePolled(() => api<{ agents: AgentInfo[] }>('/v1/agents'), 60_000, []);
  const events = useEvents(run_id);
  const texts = useRunText(run_id);
  const views = useMemo(() => fold(events), [events]);
  const rounds = useMemo(() => stateRounds(events), [events]);
  const run = record.value;
  if (record.error && !run) return <p class="error">{record.error}</p>;
  if (!run) return <p class="muted">Loading…</p>;
  const graph = run.workflow ? agents.value?.agents.find((each) => each.name === run.workflow)?.steps : undefined;
  return (
    <div>
      <RunHeader run={run} me={me} />
      {(run.pending_approvals?.length ?? 0) > 0 && <PendingApprovals run={run} me={me} />}
      {(run.pending_tool_results?.length ?? 0) > 0 && <PendingResults run={run} canAnswer={mayWrite(me)} />}
      {graph && (
        <div class="card">
          <h2>Workflow</h2>
          <WorkflowGraph steps={graph} run={run} />
        </div>
      )}
      <div class="card" data-section="timeline">
        <h2>Timeline</h2>
        <TimelineChart events={events} live={!TERMINAL.has(run.status)} />
      </div>
      {run.state && <RunState state={run.state} rounds={rounds} multiStep={views.length > 1} />}
      <Steps run={run} views={views} />
      {texts.length > 0 && <StreamedTexts texts={texts} />}
      <EventList events={events} />
    </div>
  );
}

/** The run's card: its id, facts, error or output, and the actions on it. */
function RunHeader({ run, me }: { run: Run; me: Me }) {
  return (
    <div class="card">
      <h2 class="mono">{run.run_id}</h2>
      <RunFacts run={run} me={me} />
      {run.error && (
        <p class="error">
          {run.error.error_code}: {run.error.message}
        </p>
      )}
      {run.output !== undefined && <p class="mono">{run.output}</p>}
      <RunActions run={run} me={me} />
    </div>
  );
}

/** Status, agent or workflow, duration, iterations, thread, who enqueued it, parent run, tokens and trace. */
function RunFacts({ run, me }: { run: Run; me: Me }) {
  const traceLink = run.trace_id && me.trace_url ? me.trace_url.replace('{trace_id}', run.trace_id) : undefined;
  return (
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
      {run.thread_id && (
        <div>
          <span>thread</span>
          <a href={`#/threads/${encodeURIComponent(run.thread_id)}`}>{run.thread_id}</a>
        </div>
      )}
      {run.enqueued_by && (
        <div data-fact="enqueued-by">
          <span>enqueued by</span>
          <span class="mono">{run.enqueued_by}</span>
        </div>
      )}
      {run.parent_run_id && (
        <div data-fact="parent">
          <span>parent run</span>
          <RunLink run_id={run.parent_run_id} />
          {run.parent_tool_call_id && <span class="muted"> call {run.parent_tool_call_id}</span>}
        </div>
      )}
      <div>
        <span>tokens (in / out / total)</span>
        {run.usage.input} / {run.usage.output} / {run.usage.total}
      </div>
      <div>
        <span>trace</span>
        {traceLink ? <a href={traceLink}>{run.trace_id}</a> : <span class="mono">{run.trace_id ?? '—'}</span>}
      </div>
    </div>
  );
}

/** Steps and their iterations, with each iteration's tool calls. */
function Steps({ run, views }: { run: Run; views: StepView[] }) {
  return (
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
              {node.calls.size > 0 && <CallTable calls={[...node.calls.values()]} />}
            </div>
          ))}
        </div>
      ))}
    </div>
  );
}

/** An iteration's tool calls, one row each. */
function CallTable({ calls }: { calls: CallView[] }) {
  return (
    <table>
      <tbody>
        {calls.map((call) => (
          <tr data-call={call.id}>
            <td>{call.name}</td>
            <td class="mono hide-narrow">{call.id}</td>
            <td>{call.outcome}</td>
            <td>{call.detail}</td>
            <td class="hide-narrow">{call.attempts > 1 ? `${call.attempts} attempts` : ''}</td>
            <td>{call.child_run_id && <ChildRun run_id={call.child_run_id} />}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The model's text as it streams, one block per step and iteration. */
function StreamedTexts({ texts }: { texts: StreamedText[] }) {
  return (
    <div class="card">
      <h2>Text</h2>
      {texts.map((entry) => (
        <div class="streamed" data-text={entry.key}>
          <p class="muted mono">{entry.key}</p>
          <pre>{entry.text}</pre>
        </div>
      ))}
    </div>
  );
}

/** The run's events, one row each. */
function EventList({ events }: { events: Event[] }) {
  return (
    <div class="card">
      <h2>Events ({events.length})</h2>
      <div class="events">
        <table>
          <tbody>
            {events.map((event) => (
              <tr data-seq={event.seq}>
                <td>{event.seq}</td>
                <td>
                  {event.kind}
                  {typeof event.child_run_id === 'string' && <ChildRun run_id={event.child_run_id} />}
                </td>
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
  );
}

/** The child run an agent tool's call started (SPEC §13), as a link to its page (a space before it, after an event's kind). */
function ChildRun({ run_id }: { run_id: string }) {
  return (
    <span data-child-run={run_id}>
      <span class="muted"> child run </span>
      <RunLink run_id={run_id} />
    </span>
  );
}

/**
 * The run's state (SPEC §17) as the record has it, and the rounds that changed it with the keys
 * each changed (from `StateUpdated`, which holds names and a size, never values).
 */
function RunState({ state, rounds, multiStep }: { state: Record<string, unknown>; rounds: StateRound[]; multiStep: boolean }) {
  const empty = Object.keys(state).length === 0;
  return (
    <div class="card" data-section="state">
      <h2>State</h2>
      <pre class="state mono">{empty ? '{}' : JSON.stringify(state, null, 2)}</pre>
      {rounds.length > 0 ? (
        <table>
          <thead>
            <tr>
              <th>{multiStep ? 'step · iteration' : 'iteration'}</th>
              <th>keys changed</th>
              <th>size after</th>
            </tr>
          </thead>
          <tbody>
            {rounds.map((round) => (
              <tr data-state-round={`${round.step_id}#${round.iteration}`}>
                <td>{multiStep ? `${round.step_id} · ${round.iteration}` : round.iteration}</td>
                <td class="mono">{round.keys.join(', ')}</td>
                <td>{round.size} B</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="muted">No round has changed the state{empty ? '' : ' (it is the state the run began with)'}.</p>
      )}
    </div>
  );
}
