// The console's view of the HTTP API: its shapes and one fetch helper.

export interface Me {
  name: string;
  scope: string;
  open: boolean;
  trace_url: string | null;
}
export interface Tokens {
  input: number;
  output: number;
  total: number;
}
export interface RunError {
  code: string;
  error_code: string;
  message: string;
}
export interface Run {
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
  thread_id?: string;
  /** Who enqueued it: `token:<subject>` for a run an end user's token enqueued (SPEC §19). */
  enqueued_by?: string;
  /** The tenant it was enqueued for, and its priority within the tenant (SPEC §14), when given. */
  tenant?: string;
  priority?: number;
  steered_into?: string;
  /** A child run's parent run, and the parent's call that started it (SPEC §13). */
  parent_run_id?: string;
  parent_tool_call_id?: string;
  steps?: Record<string, { status: string; output?: string; error?: RunError }>;
  pending_approvals?: { step_id: string; iteration: number; tool_call_id: string; tool_name: string; arguments: unknown; requested_at: number; expires_at: number }[];
  /** Calls waiting for a result from outside (SPEC §20), as `pending_approvals`. */
  pending_tool_results?: { step_id: string; iteration: number; tool_call_id: string; tool_name: string; arguments: unknown; requested_at: number; expires_at: number }[];
  /** The run's state as its last round left it (SPEC §17). */
  state?: Record<string, unknown>;
  /** A fork (SPEC §15): where it was forked from; a retried run: its retry. */
  forked_from?: { run_id: string; step_id: string; iteration: number };
  retried_by?: string;
}
/** A chat message as a thread keeps it (the chat-completions shape). */
export interface Message {
  role: string;
  content: string | { type: string; text?: string }[] | null;
  tool_calls?: { id: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}
export interface Thread {
  thread_id: string;
  messages: Message[];
  runs: Run[];
}
export interface Event {
  seq: number;
  kind: string;
  step_id: string;
  ts: number;
  iteration?: number;
  [field: string]: unknown;
}
/** Where a tenant stands (`GET /v1/tenants/{tenant}`, SPEC §14). */
export interface TenantStanding {
  tenant: string;
  active_runs: number;
  queued_runs: number;
  cost_usd_today: number;
}

export interface AgentInfo {
  name: string;
  kind: 'agent' | 'workflow';
  tools: string[];
  live_workers: number;
  steps?: { id: string; type: string; depends_on: string[] }[];
}
export interface QueueInfo {
  name: string;
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
  workers: number;
}

export class Problem extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function api<T>(path: string, init?: RequestInit): Promise<T> {
  const response = await fetch(path, { credentials: 'same-origin', headers: { 'content-type': 'application/json' }, ...init });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Problem(response.status, (body as { detail?: string }).detail ?? response.statusText);
  return body as T;
}

export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
