import { byteSize } from '../canonical.ts';
import { MAX_INPUT_BYTES } from '../defaults.ts';
import type { StepInputs, WorkflowStep } from '../definitions/workflow.ts';
import { parseArguments, unrepresentableArguments } from '../loop/arguments.ts';
import { type ExecuteCall, type RejectCall, planCall } from '../loop/plan.ts';
import type { RunError } from '../run-record.ts';
import { defaultStepInput } from './graph.ts';

/** What a step's `input` or `args` function made, or why it failed (`input_error`; the thrown value is for the worker log only). */
export type Built<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: RunError; readonly thrown: unknown };

type AgentStep = Extract<WorkflowStep, { type: 'agent' }>;
type ToolStep = Extract<WorkflowStep, { type: 'tool' }>;

/** An agent step's input, from the run input and its dependencies' outputs. */
export function buildAgentStepInput(step: AgentStep, inputs: StepInputs): Built<string> {
  if (!step.input) return { ok: true, value: defaultStepInput(inputs.input, step.depends_on, inputs.outputs) };
  let value: unknown;
  try {
    value = step.input(inputs);
  } catch (thrown) {
    return inputError(step.id, 'its input function threw', thrown);
  }
  if (typeof value !== 'string') return inputError(step.id, `its input function returned ${value === null ? 'null' : typeof value}, not a string`, undefined);
  if (byteSize(value) > MAX_INPUT_BYTES) return inputError(step.id, `its input is ${byteSize(value)} bytes; the limit is ${MAX_INPUT_BYTES}`, undefined);
  return { ok: true, value };
}

/**
 * A tool step's one call (`tool_call_id` = the step id), planned like a model's: ready to execute,
 * or rejected because its arguments fail the schema. Arguments come from `args`, else the run
 * input parsed as JSON.
 */
export function planToolStep(step: ToolStep, inputs: StepInputs): Built<ExecuteCall | RejectCall> {
  let raw: string;
  let problem: string | undefined;
  if (step.args) {
    let value: unknown;
    try {
      value = step.args(inputs);
    } catch (thrown) {
      return inputError(step.id, 'its args function threw', thrown);
    }
    problem = unrepresentableArguments(value);
    raw = problem === undefined ? (JSON.stringify(value) ?? '') : '';
  } else {
    raw = inputs.input;
  }
  const parsed = problem === undefined ? parseArguments(raw) : { ok: false as const, violation: problem };
  const call = { id: step.id, type: 'function' as const, function: { name: step.tool.name, arguments: raw } };
  return { ok: true, value: planCall(step.tool, 0, call, '', parsed, byteSize(raw)) };
}

function inputError(step_id: string, what: string, thrown: unknown): Built<never> {
  return { ok: false, error: { code: 'StepExecutionFailed', error_code: 'input_error', message: `step '${step_id}': ${what}` }, thrown };
}
