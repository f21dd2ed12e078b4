import { randomBytes } from 'node:crypto';
import type { Tokens } from './events/types.ts';

export type RunStatus = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled';

/** Why a run failed: the failure's class, the reason's code, and a sentence for people. */
export interface RunError {
  readonly code: string;
  readonly error_code: string;
  readonly message: string;
}

/** A run as clients see it (`client.get`, `client.wait`, `runLocal`). */
export interface RunRecord {
  readonly run_id: string;
  readonly status: RunStatus;
  /** The agent (or workflow) the run was enqueued for. */
  readonly agent?: string;
  readonly output?: string;
  readonly error?: RunError;
  readonly usage: Tokens;
  /** Provider calls made by the run. */
  readonly iterations: number;
  readonly created_at: number;
  readonly finished_at?: number;
}

export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set(['completed', 'failed', 'cancelled']);

/**
 * A new run id: `run_` and 128 random bits in base64url (22 characters). Short, because a run's
 * id is in every one of its keys, job ids and events: about 190 times per run of 8 tool calls.
 */
export function newRunId(): string {
  return `run_${randomBytes(16).toString('base64url')}`;
}
