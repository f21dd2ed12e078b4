import type { UIMessage, UIMessageChunk } from 'ai';

/** What the browser answered in an assistant message (SPEC §20): tool outputs (`addToolResult`) and approval responses (`addToolApprovalResponse`). */
export interface BrowserAnswers {
  readonly results: readonly { readonly tool_call_id: string; readonly body: { output: unknown } | { error: string } }[];
  readonly approvals: readonly { readonly tool_call_id: string; readonly body: { approved: boolean; reason?: string } }[];
}

interface ToolPartView {
  readonly type: string;
  readonly toolCallId?: string;
  readonly state?: string;
  readonly output?: unknown;
  readonly errorText?: string;
  readonly providerExecuted?: boolean;
  readonly approval?: { readonly id?: string; readonly approved?: boolean; readonly reason?: string };
}

const isToolPart = (part: ToolPartView) => (part.type === 'dynamic-tool' || part.type.startsWith('tool-')) && typeof part.toolCallId === 'string';

/**
 * The answers an assistant message holds for its run's waiting calls: the outputs and errors of
 * tool parts the browser ran (not the server's: `providerExecuted`), and approval responses.
 */
export function browserAnswers(message: UIMessage): BrowserAnswers {
  const results: { tool_call_id: string; body: { output: unknown } | { error: string } }[] = [];
  const approvals: { tool_call_id: string; body: { approved: boolean; reason?: string } }[] = [];
  for (const part of message.parts as unknown as ToolPartView[]) {
    if (!isToolPart(part) || part.providerExecuted === true) continue;
    const tool_call_id = part.toolCallId!;
    if (part.state === 'output-available') results.push({ tool_call_id, body: { output: part.output ?? null } });
    else if (part.state === 'output-error') results.push({ tool_call_id, body: { error: part.errorText || 'the tool failed in the browser' } });
    else if (part.state === 'approval-responded' && typeof part.approval?.approved === 'boolean') {
      approvals.push({
        tool_call_id: part.approval.id ?? tool_call_id,
        body: { approved: part.approval.approved, ...(part.approval.reason ? { reason: part.approval.reason } : {}) },
      });
    }
  }
  return { results, approvals };
}

/**
 * Watches a run's UI chunks for the moment its step waits only for the browser: every call of the
 * step still open is a browser tool's (`tool-input-available` with its input) or waits for an
 * approval. Then the chat's turn ends (`finish`, reason `tool-calls`), as a step with client-side
 * tool calls ends in the AI SDK, so that `useChat` can run them and send their answers.
 */
export class BrowserTurn {
  private readonly open = new Set<string>();
  private readonly browser = new Set<string>();

  /** Takes one chunk; true when the step now waits only for the browser. */
  take(chunk: UIMessageChunk): boolean {
    const view = chunk as { type: string; toolCallId?: string; input?: unknown; providerExecuted?: boolean };
    switch (view.type) {
      case 'start-step':
        this.open.clear();
        this.browser.clear();
        return false;
      case 'tool-input-start':
        this.open.add(view.toolCallId!);
        break;
      case 'tool-input-available':
        // Only a browser tool's call gets its input: the browser runs it.
        this.open.add(view.toolCallId!);
        if (view.providerExecuted !== true) this.browser.add(view.toolCallId!);
        break;
      case 'tool-approval-request':
        this.browser.add(view.toolCallId!);
        break;
      case 'tool-output-available':
      case 'tool-output-error':
        this.open.delete(view.toolCallId!);
        this.browser.delete(view.toolCallId!);
        break;
      default:
        return false;
    }
    return this.browser.size > 0 && [...this.open].every((id) => this.browser.has(id));
  }
}

/** The chunks that end the chat's turn while the run waits for the browser. */
export const BROWSER_TURN_END: readonly UIMessageChunk[] = [{ type: 'finish-step' }, { type: 'finish', finishReason: 'tool-calls' } as UIMessageChunk];
