// A run's events folded into steps, iterations and calls (as `arcflow inspect` does), the rounds that
// changed its state, and a workflow's layers.
import type { Event, Tokens } from './api.ts';

export interface CallView {
  id: string;
  name: string;
  outcome: string;
  detail: string;
  attempts: number;
  /** An agent tool's call: the child run it started (SPEC §13). */
  child_run_id?: string;
}
export interface StepView {
  id: string;
  tokens?: Tokens;
  outcome?: string;
  iterations: Map<number, { chat: string; calls: Map<string, CallView> }>;
}

/** Steps, iterations and calls, folded from the events (as `arcflow inspect` does). */
export function fold(events: Event[]): StepView[] {
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
      case 'ToolCallStarted': {
        const view = call(event);
        view.attempts = Math.max(view.attempts, Number(event.attempt));
        if (typeof event.child_run_id === 'string') view.child_run_id = event.child_run_id;
        break;
      }
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
      case 'ToolResultRequested':
        Object.assign(call(event), { outcome: 'waiting for a result', detail: `until ${new Date(Number(event.expires_at)).toLocaleTimeString()}` });
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

/** A round that changed the run's state (a `StateUpdated` event): where, the keys it changed, and the state's size after. */
export interface StateRound {
  seq: number;
  step_id: string;
  iteration: number;
  keys: string[];
  size: number;
}

/** The rounds that changed the run's state, in order (events hold key names and a size, never values). */
export function stateRounds(events: Event[]): StateRound[] {
  return events
    .filter((event) => event.kind === 'StateUpdated')
    .map((event) => ({
      seq: event.seq,
      step_id: event.step_id,
      iteration: event.iteration ?? 1,
      keys: Array.isArray(event.keys) ? event.keys.map(String) : [],
      size: Number(event.state_size_bytes),
    }));
}

/** A workflow's steps in layers: each after the layer of its last dependency. */
export function layers(steps: { id: string; depends_on: string[] }[]): { id: string; depends_on: string[] }[][] {
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
