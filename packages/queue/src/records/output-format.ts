import type { RunRecord } from '@arcflow/core';

/**
 * How a run record keeps its output: `output` is the answer's text, and `output_type` says what
 * that text is. Absent: plain text (every record written before structured output). `json`: the
 * JSON text of an answer that passed the step's output schema (SPEC §11), read back with
 * `output_json`, its parsed value. A type this reader does not know (a newer writer's) leaves the
 * text as it is.
 */
export const OutputType = { json: 'json' } as const;
export type OutputType = (typeof OutputType)[keyof typeof OutputType];

/** A record's `output` and, for a JSON output, `output_json`, from the stored fields. */
export function readOutput(output: string | undefined, output_type: string | undefined): Pick<RunRecord, 'output' | 'output_json'> {
  if (output === undefined) return {};
  if (output_type !== OutputType.json) return { output };
  try {
    return { output, output_json: JSON.parse(output) };
  } catch {
    // Checked when it was written: text that does not parse is a damaged record, still shown as text.
    return { output };
  }
}
