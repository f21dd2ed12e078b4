import type { RunInput, RunStatus } from '@arcflow/core';
import { StoredFormatError } from './formats.ts';
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

/** A value stored as JSON by this engine. */
function storedJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new StoredFormatError(what, 'malformed');
  }
}

/** The run's trace ids as stored: an object of them, or none when what is stored is not one (spans are not worth failing a run for). */
export function storedTrace(text: string | null | undefined): RunSpec['trace'] {
  try {
    const trace: unknown = JSON.parse(text ?? '{}');
    return trace !== null && typeof trace === 'object' && !Array.isArray(trace) ? (trace as RunSpec['trace']) : {};
  } catch {
    return {};
  }
}

/**
 * A run's spec from its record's `SPEC_FIELDS` and `stream`; undefined for a run not (or no longer)
 * stored. A record that is there but cannot be read throws {@link StoredFormatError}.
 */
export function specFrom(run_id: string, fields: (string | null)[], stream: string | null): RunSpec | undefined {
  const [status, agent, input, config, exec_config, trace, definition_hash, input_kind] = fields;
  if (!status) return undefined;
  // A record with a status is a run's: what it lacks or cannot be parsed makes it unreadable, never absent.
  if (agent == null) throw new StoredFormatError(`agent of run ${run_id}`, 'missing');
  if (input == null) throw new StoredFormatError(`input of run ${run_id}`, 'missing');
  return {
    run_id,
    status: status as RunStatus,
    agent,
    input: readInput(input, input_kind, `input of run ${run_id}`),
    config: storedJson(config ?? 'null', `config of run ${run_id}`),
    exec_config: storedJson(exec_config ?? 'null', `exec_config of run ${run_id}`),
    trace: storedTrace(trace),
    definition_hash: definition_hash ?? '',
    ...(stream === '1' || stream === '0' ? { stream: stream === '1' } : {}),
  };
}
