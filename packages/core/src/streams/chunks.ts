import { isPlainObject } from '../plain-object.ts';

/**
 * A chunk of a run's stream (SPEC §12): what the model writes while it writes it, beside the
 * trace events (which never hold text). `offset` is 1, 2, 3 … per run, with no gaps.
 */
export type StreamChunk =
  | { readonly offset: number; readonly type: 'text'; readonly step_id: string; readonly iteration: number; readonly attempt: number; readonly delta: string }
  | {
      readonly offset: number;
      readonly type: 'tool_call';
      readonly step_id: string;
      readonly iteration: number;
      readonly attempt: number;
      readonly tool_call_id: string;
      readonly tool_name: string;
    }
  | {
      readonly offset: number;
      readonly type: 'tool_result';
      readonly step_id: string;
      readonly iteration: number;
      readonly tool_call_id: string;
      readonly status: 'completed' | 'failed';
    }
  /** An external tool's call waits for its result (SPEC §20): its arguments, for the browser that answers. No other tool's arguments enter the stream. */
  | {
      readonly offset: number;
      readonly type: 'tool_input';
      readonly step_id: string;
      readonly iteration: number;
      readonly tool_call_id: string;
      readonly tool_name: string;
      readonly input: unknown;
    }
  /** A call waits for a person's approval (SPEC §10); no arguments. */
  | { readonly offset: number; readonly type: 'tool_approval'; readonly step_id: string; readonly iteration: number; readonly tool_call_id: string; readonly tool_name: string }
  | { readonly offset: number; readonly type: 'reset'; readonly step_id: string; readonly iteration: number; readonly attempt: number }
  | { readonly offset: number; readonly type: 'end'; readonly status: 'completed' | 'failed' | 'cancelled' };

export type StreamChunkType = StreamChunk['type'];

const isWhole = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
const isText = (value: unknown): value is string => typeof value === 'string';

/**
 * A chunk read back from Redis or from the wire, checked field by field (stored state is
 * untrusted); `undefined` for anything that is not a chunk of a known type.
 */
export function readStreamChunk(value: unknown): StreamChunk | undefined {
  if (!isPlainObject(value) || !isWhole(value.offset) || value.offset < 1) return undefined;
  const { offset } = value;
  switch (value.type) {
    case 'end':
      return value.status === 'completed' || value.status === 'failed' || value.status === 'cancelled' ? { offset, type: 'end', status: value.status } : undefined;
    case 'tool_result':
      if (!isText(value.step_id) || !isWhole(value.iteration) || !isText(value.tool_call_id)) return undefined;
      if (value.status !== 'completed' && value.status !== 'failed') return undefined;
      return { offset, type: 'tool_result', step_id: value.step_id, iteration: value.iteration, tool_call_id: value.tool_call_id, status: value.status };
    case 'tool_input':
    case 'tool_approval': {
      if (!isText(value.step_id) || !isWhole(value.iteration) || !isText(value.tool_call_id) || !isText(value.tool_name)) return undefined;
      const call = { offset, step_id: value.step_id, iteration: value.iteration, tool_call_id: value.tool_call_id, tool_name: value.tool_name };
      return value.type === 'tool_approval' ? { ...call, type: 'tool_approval' } : { ...call, type: 'tool_input', input: value.input ?? null };
    }
  }
  if (!isText(value.step_id) || !isWhole(value.iteration) || !isWhole(value.attempt)) return undefined;
  const place = { offset, step_id: value.step_id, iteration: value.iteration, attempt: value.attempt };
  switch (value.type) {
    case 'text':
      return isText(value.delta) ? { ...place, type: 'text', delta: value.delta } : undefined;
    case 'tool_call':
      return isText(value.tool_call_id) && isText(value.tool_name) ? { ...place, type: 'tool_call', tool_call_id: value.tool_call_id, tool_name: value.tool_name } : undefined;
    case 'reset':
      return { ...place, type: 'reset' };
    default:
      return undefined;
  }
}
