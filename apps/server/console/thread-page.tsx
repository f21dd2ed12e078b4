// A thread's page (SPEC §11): its messages as a conversation, and its runs in enqueue order, live.
import { type Me, type Message, type Thread, api } from './api.ts';
import { usePolled } from './hooks.ts';
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
  return (
    <div>
      <div class="card">
        <h2 class="mono">thread {thread_id}</h2>
        <div class="conversation">
          {messages.map((message, index) => (
            <div class={`message ${message.role}`} data-message={index}>
              <span class="role">{message.role}</span>
              {textOf(message) && <p>{textOf(message)}</p>}
              {message.tool_calls?.map((call) => (
                <p class="mono">
                  calls {call.function.name}({call.function.arguments})
                </p>
              ))}
            </div>
          ))}
          {messages.length === 0 && <p class="muted">No messages yet: a thread gets a run's messages when the run completes.</p>}
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
