import type { StreamChunk } from '@arcflow/core';
import { SseFrame } from './sse.ts';

/**
 * The AI SDK's UI message stream protocol (v1), as `useChat` reads it: Server-Sent Events whose
 * `data:` is a JSON chunk, ended by `data: [DONE]`, served with these headers (the `ai`
 * package's `UI_MESSAGE_STREAM_HEADERS`).
 */
export const UI_MESSAGE_STREAM_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
});

/** Whether a request asks for the UI message stream: `?format=ai-sdk`, or the protocol's request header. */
export function wantsUiMessageStream(format: string | undefined, header: string | string[] | undefined): boolean {
  return format === 'ai-sdk' || header === 'v1';
}

type UiChunk = Record<string, unknown> & { readonly type: string };

/**
 * Turns a run's chunks into UI message chunks, one run chunk at a time, keeping what the
 * protocol needs to know (the step and the text part open). A step of the protocol is an
 * iteration (one provider call); an attempt's text is a text part of its own, and a `reset`
 * is the protocol's `reset-step`, which drops the step's parts so far. Tool calls are dynamic tool
 * parts with their status (the stream holds no arguments or results), executed by the server
 * (`providerExecuted`); an external tool's call gets its arguments (`tool_input`, SPEC §20) for the
 * browser to run it, and a call waiting for approval an approval request (`tool_approval`). The run's `end` closes
 * the message: `finish` when it completed, `error` when it failed, `abort` when it was cancelled.
 *
 * Resuming after offset n replays chunks 1…n through `translate` without sending their output,
 * so the state is the one the reader had.
 */
export class UiMessageTranslator {
  /** Where the translation is; never changed, replaced by the next (so that translators that went alike share it). */
  private state: UiState = INITIAL;

  constructor(private readonly run_id: string) {}

  /** The UI chunks for `chunk`; `failure` is the error text shown for a failed run's `end`. */
  translate(chunk: StreamChunk, failure = 'the run failed'): UiChunk[] {
    const next = new Builder(this.state);
    const out = next.translate(this.run_id, chunk, failure);
    this.state = next.done();
    return out;
  }

  /**
   * The frames for `chunk` (`uiFrames`, `undefined` when it has none), made once for every
   * translator of the run in the same state given the same chunk (a fan-out's viewers), which
   * then share their next state too. Not for a failed run's `end`, whose text is the reader's.
   */
  frames(chunk: StreamChunk): SseFrame | undefined {
    let byState = shared.get(chunk);
    if (!byState) {
      byState = new WeakMap();
      shared.set(chunk, byState);
    }
    let step = byState.get(this.state);
    if (!step) {
      const next = new Builder(this.state);
      const out = next.translate(this.run_id, chunk, 'the run failed');
      step = { frame: out.length > 0 ? new SseFrame(uiFrames(chunk.offset, out)) : undefined, next: next.done() };
      byState.set(this.state, step);
    }
    this.state = step.next;
    return step.frame;
  }
}

interface UiState {
  readonly started: boolean;
  readonly step: string | undefined;
  readonly openText: string | undefined;
  /** Calls of the current step, whose results can be shown on it. */
  readonly stepCalls: ReadonlySet<string>;
}

const INITIAL: UiState = Object.freeze({ started: false, step: undefined, openText: undefined, stepCalls: new Set<string>() });

/** Per run chunk, per translator state before it: its frames and the state after (objects, so the same chunk and state make the same). */
const shared = new WeakMap<StreamChunk, WeakMap<UiState, { readonly frame: SseFrame | undefined; readonly next: UiState }>>();

/** One chunk's translation from a state: the UI chunks, and the state after. */
class Builder {
  private started: boolean;
  private step: string | undefined;
  private openText: string | undefined;
  private stepCalls: ReadonlySet<string>;
  private changedCalls: Set<string> | undefined;

  constructor(private readonly from: UiState) {
    ({ started: this.started, step: this.step, openText: this.openText, stepCalls: this.stepCalls } = from);
  }

  done(): UiState {
    const { from, started, step, openText, stepCalls } = this;
    if (started === from.started && step === from.step && openText === from.openText && stepCalls === from.stepCalls) return from;
    return { started, step, openText, stepCalls };
  }

  private calls(): Set<string> {
    this.changedCalls ??= new Set(this.stepCalls);
    this.stepCalls = this.changedCalls;
    return this.changedCalls;
  }

  translate(run_id: string, chunk: StreamChunk, failure: string): UiChunk[] {
    const out: UiChunk[] = [];
    if (!this.started) {
      this.started = true;
      out.push({ type: 'start', messageId: run_id });
    }
    switch (chunk.type) {
      case 'text': {
        this.enterStep(`${chunk.step_id}|${chunk.iteration}`, out);
        const id = `${run_id}-${chunk.step_id}-${chunk.iteration}-${chunk.attempt}`;
        if (this.openText !== id) {
          this.closeText(out);
          this.openText = id;
          out.push({ type: 'text-start', id });
        }
        out.push({ type: 'text-delta', id, delta: chunk.delta });
        break;
      }
      case 'reset':
        if (this.step === `${chunk.step_id}|${chunk.iteration}`) {
          this.openText = undefined;
          this.calls().clear();
          out.push({ type: 'reset-step' });
        }
        break;
      case 'tool_call':
        this.enterStep(`${chunk.step_id}|${chunk.iteration}`, out);
        this.calls().add(chunk.tool_call_id);
        // Its input is not in the stream (a worker tool's arguments never are): the part starts, and only a browser tool's gets its input (`tool_input`).
        out.push({ type: 'tool-input-start', toolCallId: chunk.tool_call_id, toolName: chunk.tool_name, dynamic: true });
        break;
      case 'tool_input':
        // An external tool's call waits for the browser (SPEC §20): its part gets its input, and `useChat`'s `onToolCall` runs it.
        this.enterStep(`${chunk.step_id}|${chunk.iteration}`, out);
        this.calls().add(chunk.tool_call_id);
        out.push({ type: 'tool-input-available', toolCallId: chunk.tool_call_id, toolName: chunk.tool_name, input: chunk.input, dynamic: true });
        break;
      case 'tool_approval':
        // A call waits for a person (SPEC §10): AI SDK 7's approval request on its part, answered with `addToolApprovalResponse` (the approval's id is the call's).
        if (!this.stepCalls.has(chunk.tool_call_id)) break;
        out.push({ type: 'tool-approval-request', approvalId: chunk.tool_call_id, toolCallId: chunk.tool_call_id });
        break;
      case 'tool_result':
        // The protocol finds a call among the current step's parts; a result of another step (a workflow's parallel steps) has none to go to.
        if (!this.stepCalls.has(chunk.tool_call_id)) break;
        // The server ran (or took the answer of) the call: `providerExecuted`, so the chat does not wait for the browser to answer it.
        out.push(
          chunk.status === 'completed'
            ? { type: 'tool-output-available', toolCallId: chunk.tool_call_id, output: { status: 'completed' }, providerExecuted: true, dynamic: true }
            : { type: 'tool-output-error', toolCallId: chunk.tool_call_id, errorText: 'the tool call failed', providerExecuted: true, dynamic: true },
        );
        break;
      case 'end':
        this.closeText(out);
        if (this.step !== undefined) out.push({ type: 'finish-step' });
        this.step = undefined;
        if (chunk.status === 'completed') out.push({ type: 'finish', finishReason: 'stop' });
        else if (chunk.status === 'failed') out.push({ type: 'error', errorText: failure });
        else out.push({ type: 'abort', reason: 'the run was cancelled' });
        break;
    }
    return out;
  }

  private enterStep(step: string, out: UiChunk[]): void {
    if (this.step === step) return;
    this.closeText(out);
    if (this.step !== undefined) out.push({ type: 'finish-step' });
    this.step = step;
    if (this.stepCalls.size > 0) this.calls().clear();
    out.push({ type: 'start-step' });
  }

  private closeText(out: UiChunk[]): void {
    if (this.openText === undefined) return;
    out.push({ type: 'text-end', id: this.openText });
    this.openText = undefined;
  }
}

/** A run chunk's UI chunks as SSE frames; the last carries the chunk's offset as its `id:`, so a reconnect resumes after it. */
export function uiFrames(offset: number, chunks: readonly UiChunk[]): string {
  return chunks.map((chunk, index) => `${index === chunks.length - 1 ? `id: ${offset}\n` : ''}data: ${JSON.stringify(chunk)}\n\n`).join('');
}
