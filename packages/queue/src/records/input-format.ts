import { RequestError, type RunInput, checkRunInput } from '@arcflow/core';
import { StoredFormatError } from './formats.ts';

/**
 * How a run's input is kept in its record (SPEC §11): a string as it is, in `input`; a list of
 * messages as its JSON text in `input`, with `input_kind: messages`. A record without
 * `input_kind` (every record before messages existed) holds a string.
 */
export interface StoredInput {
  readonly input: string;
  readonly input_kind?: 'messages';
}

export function writeInput(input: RunInput): StoredInput {
  return typeof input === 'string' ? { input } : { input: JSON.stringify(input), input_kind: 'messages' };
}

/**
 * A stored input read back, its shape checked as at enqueue but not its size: a run that steered
 * messages start (SPEC §11) holds them all, which may be more than one enqueue may send. A value no
 * version could have written is unreadable.
 */
export function readInput(input: string, kind: string | null | undefined, what: string): RunInput {
  if (kind === null || kind === undefined) return input;
  if (kind !== 'messages') throw new StoredFormatError(what, kind);
  try {
    return checkRunInput(JSON.parse(input), Number.POSITIVE_INFINITY);
  } catch (error) {
    if (error instanceof SyntaxError || error instanceof RequestError) throw new StoredFormatError(what, 'malformed');
    throw error;
  }
}

/**
 * A workflow run's input: always a string, since the client refuses a list for a workflow
 * (its steps' inputs are built from text). A list here was not written by arcflow.
 */
export function workflowInputText(input: RunInput, run_id: string): string {
  if (typeof input !== 'string') throw new StoredFormatError(`input of workflow run ${run_id}`, 'messages');
  return input;
}
