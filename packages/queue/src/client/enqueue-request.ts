import type { OnBusy, RunInput } from '@arcflow/core';

/** What `client.enqueue` is asked for. */
export interface EnqueueRequest {
  agent: string;
  /** A string (one user message), or a list of chat messages (SPEC §11); a workflow takes a string. */
  input: RunInput;
  config?: unknown;
  exec_config?: unknown;
  /**
   * A second enqueue with the same key and the same request returns the first run's id; with another
   * request (agent, input, config, exec_config, thread_id, state) it is refused `idempotency_conflict`.
   */
  idempotency_key?: string;
  /** The thread the run continues (SPEC §11): it runs on the thread's conversation so far. */
  thread_id?: string;
  /** What the run does when its thread has a run queued or running (default `queue`). */
  on_busy?: OnBusy;
  /**
   * The run's initial state (SPEC §17): a JSON object of at most the agent's `max_state_bytes`.
   * Without it a run starts from `{}`, or on a thread from the state its last completed run left.
   */
  state?: Readonly<Record<string, unknown>>;
  /**
   * Whether the run streams the model's text as it is written (SPEC §12); default: as its agent
   * is defined (`new Agent({ stream })`, else false). A run that does not stream makes plain
   * provider calls, and its stream gives each iteration's text whole.
   */
  stream?: boolean;
  /**
   * Who enqueued the run, kept on its record (1–200 printable characters). `arcflow serve` sets
   * `token:<subject>` for a run enqueued with an end user's token (SPEC §19).
   */
  enqueued_by?: string;
  /** The tenant the run is for (SPEC §14): `[A-Za-z0-9_.:-]{1,128}`; without it the run is the `default` tenant's. */
  tenant?: string;
  /** The run's priority within its tenant (SPEC §14): an integer 1 (first) … 10; default 5. */
  priority?: number;
}
