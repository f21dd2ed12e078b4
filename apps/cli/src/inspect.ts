import type { RunRecord, TraceEvent } from '@arcflow/core';
import { type CallOrder, roundKey } from './call-order.ts';
import { printable } from './format.ts';

interface CallNode {
  name: string;
  id: string;
  attempts: number;
  outcome: string;
  detail: string;
  /** The child run an agent tool's call started (SPEC §13). */
  child?: string;
}

interface IterationNode {
  iteration: number;
  chat: string;
  calls: Map<string, CallNode>;
}

/**
 * The run as a tree for people: steps, their iterations (the provider call with model, latency
 * and tokens) and each iteration's tool calls with attempts, duration, size and outcome. An
 * iteration's calls are listed in `callOrder` (the model's order) where it has them; calls it
 * does not list follow in the order of their events.
 */
export function renderInspectTree(run: RunRecord, events: readonly TraceEvent[], callOrder: CallOrder = new Map()): string {
  // A run not ended shows only its status: no duration yet.
  const duration = run.finished_at ? `  ${run.finished_at - run.created_at} ms` : '';
  const kind = run.workflow ? `workflow ${run.workflow}  ` : '';
  const lines = [`run ${run.run_id}  ${kind}${run.status}${duration}  tokens ${tokens(run.usage)}${run.error ? `  ${run.error.code}(${run.error.error_code})` : ''}`];
  // A workflow's steps in graph order (the record lists them so), including those that never started.
  const tree = new RunTree(Object.keys(run.steps ?? {}));
  for (const event of events) {
    if (event.step_id === 'run' && run.workflow) continue;
    foldStepEvent(tree, event);
    foldCallEvent(tree, event);
  }
  lines.push(...waitingLines(run));
  const stepList = [...tree.steps.entries()];
  stepList.forEach(([stepId, step], stepIndex) => {
    lines.push(...stepLines(stepId, step, run.steps?.[stepId]?.status, stepIndex === stepList.length - 1, callOrder));
  });
  return lines.map(printable).join('\n');
}

type CallEvent = TraceEvent & { tool_name: string; tool_call_id: string; iteration: number };

/** The steps of a run as its events build them, each made when first named. */
class RunTree {
  readonly steps = new Map<string, StepNode>();

  constructor(stepIds: readonly string[]) {
    for (const id of stepIds) this.steps.set(id, newStep());
  }

  stepOf(id: string): StepNode {
    let step = this.steps.get(id);
    if (!step) {
      step = newStep();
      this.steps.set(id, step);
    }
    return step;
  }

  iterationOf(stepId: string, n: number): IterationNode {
    const step = this.stepOf(stepId);
    let node = step.iterations.get(n);
    if (!node) {
      node = { iteration: n, chat: 'chat (pending)', calls: new Map() };
      step.iterations.set(n, node);
    }
    return node;
  }

  callOf(event: CallEvent): CallNode {
    const node = this.iterationOf(event.step_id, event.iteration);
    let call = node.calls.get(event.tool_call_id);
    if (!call) {
      call = { name: event.tool_name, id: event.tool_call_id, attempts: 0, outcome: 'running', detail: '' };
      node.calls.set(event.tool_call_id, call);
    }
    return call;
  }
}

/** What an event tells of its step: its type, outcome, tokens, agent, an iteration's provider call, or a line under it. */
function foldStepEvent(tree: RunTree, event: TraceEvent): void {
  switch (event.kind) {
    case 'StepStarted':
      Object.assign(tree.stepOf(event.step_id), { type: event.step_type, after: event.depends_on });
      break;
    case 'StepCompleted':
      tree.stepOf(event.step_id).outcome = `${event.duration_ms} ms  ${event.output_size_bytes} B out`;
      break;
    case 'StepSkipped':
      tree.stepOf(event.step_id).outcome = `${event.reason}${event.failed_dependency ? ` (${event.failed_dependency})` : ''}`;
      break;
    case 'TokensConsumed':
      tree.stepOf(event.step_id).tokens = event.cumulative;
      break;
    case 'AgentInvoked':
      tree.stepOf(event.step_id).agent = `agent ${event.agent_name}  ${event.mode}  max_iterations ${event.max_iterations}`;
      break;
    case 'ProviderResponseReceived':
      tree.iterationOf(event.step_id, event.iteration).chat =
        `chat ${event.model_id} (${event.provider_id})  ${event.latency_ms} ms  tokens ${tokens(event.tokens)}  ${event.finish_reason}, ${event.tool_calls_count} tool call(s)`;
      break;
    case 'ProviderRateLimited':
      tree.stepOf(event.step_id).footer.push(`iteration ${event.iteration}: rate limited, waited ${event.retry_after_seconds} s (attempt ${event.attempt})`);
      break;
    case 'ProviderError':
      tree
        .stepOf(event.step_id)
        .footer.push(
          `iteration ${event.iteration}: provider error ${event.error_code}${event.status ? ` HTTP ${event.status}` : ''} from ${event.model_id ?? '?'} (${event.provider_id}, attempt ${event.attempt}${event.retryable ? ', retryable' : ''})`,
        );
      break;
    case 'AgentResponseReceived':
      tree.stepOf(event.step_id).footer.push(`answered after ${event.iterations} iteration(s): ${event.output_size_bytes} B`);
      break;
    case 'StepExecutionFailed':
      tree.stepOf(event.step_id).footer.push(`failed: ${event.error_code} — ${event.message}`);
      break;
    default:
      break;
  }
}

/** What an event tells of a tool call: its attempts, child run, outcome and detail. */
function foldCallEvent(tree: RunTree, event: TraceEvent): void {
  switch (event.kind) {
    case 'ToolCallStarted':
      tree.callOf(event).attempts = Math.max(tree.callOf(event).attempts, event.attempt);
      if (event.child_run_id) tree.callOf(event).child = event.child_run_id;
      break;
    case 'ToolCallCompleted':
      Object.assign(tree.callOf(event), { outcome: 'completed', detail: `${event.duration_ms} ms  ${event.output_size_bytes} B out` });
      break;
    case 'ToolCallFailed':
      Object.assign(tree.callOf(event), { outcome: `failed ${event.error_code}`, detail: `${event.duration_ms} ms` });
      break;
    case 'ToolInputValidationFailed':
      Object.assign(tree.callOf(event), { outcome: 'invalid input', detail: event.violation_description });
      break;
    case 'ToolApprovalRequested':
      Object.assign(tree.callOf(event), { outcome: 'waiting for approval', detail: '' });
      break;
    case 'ToolResultRequested':
      Object.assign(tree.callOf(event), { outcome: 'waiting for a result', detail: '' });
      break;
    case 'ToolApprovalResolved':
      Object.assign(tree.callOf(event), { outcome: event.approved ? 'approved' : 'rejected', detail: event.by ? `by ${event.by}` : '' });
      break;
    case 'LoopDetected':
      Object.assign(tree.callOf(event), { outcome: `loop detected (${event.action})`, detail: `${event.repeats} repeats in ${event.window}` });
      break;
    default:
      break;
  }
}

/** The calls waiting for an approval or a result, each with the command that answers it. */
function waitingLines(run: RunRecord): string[] {
  const lines: string[] = [];
  for (const call of run.pending_approvals ?? []) {
    lines.push(`waiting for approval: ${call.tool_call_id} ${call.tool_name} ${JSON.stringify(call.arguments)} (arcflow approve ${run.run_id} ${call.tool_call_id} [--reject])`);
  }
  for (const call of run.pending_tool_results ?? []) {
    lines.push(
      `waiting for a result: ${call.tool_call_id} ${call.tool_name} ${JSON.stringify(call.arguments)} (arcflow tool-result ${run.run_id} ${call.tool_call_id} --output JSON | --error TEXT)`,
    );
  }
  return lines;
}

/** A step's branch of the tree: its header, its iterations (or, for a tool step, its call) with their calls, and its footer. */
function stepLines(stepId: string, step: StepNode, status: string | undefined, lastStep: boolean, callOrder: CallOrder): string[] {
  const lines = [`${lastStep ? '└─' : '├─'} ${stepHeader(stepId, step, status)}`];
  const pad = lastStep ? '   ' : '│  ';
  const iterations = [...step.iterations.values()].sort((a, b) => a.iteration - b.iteration);
  // A tool step is one call, shown under the step itself.
  const children =
    step.type === 'tool'
      ? [
          ...iterations.flatMap((node) => [...node.calls.values()]).map((call) => ({ text: callLine(call), calls: [] as CallNode[] })),
          ...step.footer.map((text) => ({ text, calls: [] as CallNode[] })),
        ]
      : [
          ...iterations.map((node) => ({ text: `iteration ${node.iteration}  ${node.chat}`, calls: inOrder(node.calls, callOrder.get(roundKey(stepId, node.iteration))) })),
          ...step.footer.map((text) => ({ text, calls: [] as CallNode[] })),
        ];
  children.forEach((child, index) => {
    const last = index === children.length - 1;
    lines.push(`${pad}${last ? '└─' : '├─'} ${child.text}`);
    child.calls.forEach((call, callIndex) => {
      const lastCall = callIndex === child.calls.length - 1;
      lines.push(`${pad}${last ? '   ' : '│  '}${lastCall ? '└─' : '├─'} ${callLine(call)}`);
    });
  });
  return lines;
}

interface StepNode {
  type?: 'agent' | 'tool';
  after?: readonly string[];
  agent?: string;
  outcome?: string;
  tokens?: { input: number; output: number; total: number };
  iterations: Map<number, IterationNode>;
  footer: string[];
}

function newStep(): StepNode {
  return { iterations: new Map(), footer: [] };
}

/** A step's line: its id, and for a workflow step its type, status, duration or reason, tokens and dependencies. */
function stepHeader(id: string, step: StepNode, status: string | undefined): string {
  const parts = [`step ${id}`];
  if (step.type === 'tool') parts.push('tool');
  if (status) parts.push(status);
  if (step.outcome) parts.push(step.outcome);
  if (step.tokens && status) parts.push(`tokens ${tokens(step.tokens)}`);
  if (step.agent) parts.push(step.agent);
  if (step.after && step.after.length > 0) parts.push(`after ${step.after.join(', ')}`);
  return parts.join('  ');
}

/** A round's calls in the given order of ids; calls it does not list keep their place after those. */
function inOrder(calls: ReadonlyMap<string, CallNode>, order: readonly string[] = []): CallNode[] {
  const position = new Map(order.map((id, index) => [id, index]));
  return [...calls.values()].sort((a, b) => (position.get(a.id) ?? order.length) - (position.get(b.id) ?? order.length));
}

function callLine(call: CallNode): string {
  const attempts = call.attempts > 1 ? `  attempts ${call.attempts}` : '';
  const child = call.child ? `  child run ${call.child}` : '';
  return `${call.name} ${call.id}  ${call.outcome}  ${call.detail}${attempts}${child}`.trimEnd();
}

function tokens(value: { input: number; output: number; total: number }): string {
  return `${value.input}/${value.output}/${value.total}`;
}
