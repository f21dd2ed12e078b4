// A thread's page (SPEC §11): its messages as a conversation (bubbles by role, tool calls and their
// results folded), the text of a run still writing as it streams (SPEC §12), and its runs, live.
import { type Me, type Message, TERMINAL, type Thread, api } from './api.ts';
import { usePolled, useRunText } from './hooks.ts';
import { TokenForm } from './token-form.tsx';
import { RunsTable } from './views.tsx';

/** A message's text: its string, or its parts' text (an image as [image]). */
function textOf(message: Message): string {
  const { content } = message;
  if (content === null) return '';
  return typeof content === 'string' ? content : content.map((part) => (part.type === 'text' ? (part.text ?? '') : '[image]')).join(' ');
}

export function ThreadPage({ thread_id, me }: { thread_id: string; me: Me }) {
  // A thread grows while it has runs to come: polled, never "done".
  const thread = usePolled(() => api<Thread>(`/v1/threads/${encodeURIComponent(thread_id)}`), 2_000, [thread_id]);
  if (thread.error && !thread.value) return <p class="error">{thread.error}</p>;
  if (!thread.value) return <p class="muted">Loading…</p>;
  const { messages, runs } = thread.value;
  // A tool result names its call by id: the call's tool name, from the assistant turn that made it.
  const toolNames = new Map(messages.flatMap((message) => (message.tool_calls ?? []).map((call) => [call.id, call.function.name] as const)));
  const writing = runs.find((run) => !TERMINAL.has(run.status));
  return (
    <div>
      <div class="card">
        <h2 class="mono">thread {thread_id}</h2>
        <div class="conversation">
          {messages.map((message, index) => (
            <div class={`message ${message.role}`} data-message={index}>
              <span class="role">{message.role}</span>
              {message.role === 'tool' ? (
                <details class="folded">
                  <summary>result of {toolNames.get(message.tool_call_id ?? '') ?? 'a call'}</summary>
                  <p class="mono">{textOf(message)}</p>
                </details>
              ) : (
                textOf(message) && <p>{textOf(message)}</p>
              )}
              {message.tool_calls?.map((call) => (
                <details class="folded" data-tool-call={call.id}>
                  <summary>calls {call.function.name}</summary>
                  <p class="mono">{call.function.arguments}</p>
                </details>
              ))}
            </div>
          ))}
          {writing && <LiveText run_id={writing.run_id} key={writing.run_id} />}
          {messages.length === 0 && !writing && <p class="muted">No messages yet: a thread gets a run's messages when the run completes.</p>}
        </div>
      </div>
      <div class="card">
        <h2>Runs</h2>
        <RunsTable runs={runs} />
      </div>
      {me.scope !== 'read' && <TokenForm thread_id={thread_id} />}
    </div>
  );
}

/** The text a run of the thread is writing now, from its stream, as an assistant bubble still growing. */
function LiveText({ run_id }: { run_id: string }) {
  const texts = useRunText(run_id);
  const text = texts.at(-1)?.text ?? '';
  if (!text) return null;
  return (
    <div class="message assistant live" data-live-run={run_id}>
      <span class="role">assistant · writing</span>
      <p>{text}</p>
    </div>
  );
}
