import type { RunInput, RunStatus } from '@arcflow/core';
import { readInput } from './input-format.ts';

/** What a run was enqueued with, as the workers read it back. */
export interface RunSpec {
  readonly run_id: string;
  readonly status: RunStatus;
  readonly agent: string;
  /** A string, or a list of messages (SPEC §11). */
  readonly input: RunInput;
  readonly config: unknown;
  readonly exec_config: unknown;
  /**
   * The run's trace: its root span (`traceparent`), the span enqueue was called in (`request`) and,
   * for a child run, the span of its parent's call that its root span is a child of (`parent`).
   */
  readonly trace: { readonly traceparent?: string; readonly request?: string; readonly parent?: string };
  /** The agent's definition hash in the registry when the run was enqueued ('' if unknown). */
  readonly definition_hash: string;
  /** Whether the run was asked to stream (SPEC §12), or not to; absent: as its agent says. */
  readonly stream?: boolean;
}

/** The record fields a run's spec is read from, in order (`loadStep.lua` reads the same). */
export const SPEC_FIELDS = ['status', 'agent', 'input', 'config', 'exec_config', 'trace', 'definition_hash', 'input_kind'] as const;

/** A run's spec from its record's `SPEC_FIELDS` and `stream`; undefined for a run not (or no longer) stored. */
export function specFrom(run_id: string, fields: (string | null)[], stream: string | null): RunSpec | undefined {
  const [status, agent, input, config, exec_config, trace, definition_hash, input_kind] = fields;
  if (!status || agent == null || input == null) return undefined;
  return {
    run_id,
    status: status as RunStatus,
    agent,
    input: readInput(input, input_kind, `input of run ${run_id}`),
    config: JSON.parse(config ?? 'null'),
    exec_config: JSON.parse(exec_config ?? 'null'),
    trace: JSON.parse(trace ?? '{}'),
    definition_hash: definition_hash ?? '',
    ...(stream === '1' || stream === '0' ? { stream: stream === '1' } : {}),
  };
}
