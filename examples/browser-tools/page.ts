// The chat page: the model asks the browser for the user's location (a browser tool: this page
// answers it) and for a confirmation (an approval), end to end over `arcflow serve`. Open
// page.html?api=<arcflow serve URL>&key=<key of scope write>&chat=<thread id> (in production, a
// token minted by your backend for the signed-in user instead of a key). Written with `h` so that
// it needs no JSX build step beyond bundling (see page.html).
import { lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import { ArcflowChatTransport } from 'arcflow/ai-sdk';
import { h, render } from 'preact';
import { useState } from 'preact/hooks';
import { useChat } from './use-chat.ts';

const params = new URLSearchParams(location.search);
const transport = new ArcflowChatTransport({
  api: params.get('api') ?? 'http://127.0.0.1:8080',
  agent: 'concierge',
  headers: { authorization: `Bearer ${params.get('key') ?? ''}` },
});

/** The user's city as the browser knows it: the city of its time zone (`Europe/Oslo` → `Oslo`). */
function browserCity(): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return (zone.split('/').at(-1) ?? zone).replaceAll('_', ' ');
}

type ToolPart = { type: string; toolCallId: string; toolName?: string; state: string; input?: { reason?: string }; approval?: { id: string } };

function App() {
  const [draft, setDraft] = useState('');
  const { messages, status, sendMessage, addToolOutput, addToolApprovalResponse } = useChat({
    id: params.get('chat') ?? 'concierge-demo',
    transport,
    resume: true,
    // Each answer goes back to the waiting run as soon as the step has all it waits for.
    sendAutomaticallyWhen: (options) => lastAssistantMessageIsCompleteWithToolCalls(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options),
  });
  const share = (part: ToolPart, city: string | undefined) =>
    addToolOutput(
      city
        ? { tool: 'get_location', toolCallId: part.toolCallId, output: { city } }
        : { tool: 'get_location', toolCallId: part.toolCallId, state: 'output-error', errorText: 'the user did not share their location' },
    );
  const button = (label: string, onClick: () => unknown) => h('button', { type: 'button', onClick }, label);
  const partView = (raw: { type: string }, index: number) => {
    if (raw.type === 'text') return h('p', { key: index }, (raw as unknown as { text: string }).text);
    const part = raw as unknown as ToolPart;
    if (part.type !== 'dynamic-tool') return null;
    if (part.toolName === 'get_location' && part.state === 'input-available') {
      return h('div', { key: index, class: 'ask', 'data-ask': 'location' }, [
        h('p', null, `The assistant asks for your location (${part.input?.reason ?? ''}).`),
        button(`Share: ${browserCity()}`, () => share(part, browserCity())),
        button('Do not share', () => share(part, undefined)),
      ]);
    }
    if (part.state === 'approval-requested') {
      return h('div', { key: index, class: 'ask', 'data-ask': 'approval' }, [
        h('p', null, `Go ahead with ${part.toolName}?`),
        button('Confirm', () => addToolApprovalResponse({ id: part.approval!.id, approved: true })),
        button('Cancel', () => addToolApprovalResponse({ id: part.approval!.id, approved: false, reason: 'the user said no' })),
      ]);
    }
    return h('p', { key: index, class: 'tool' }, `${part.toolName}: ${part.state}`);
  };
  return h('main', null, [
    h('h1', null, 'Concierge'),
    ...messages.map((message) => h('section', { key: message.id, class: message.role }, message.parts.map(partView))),
    h(
      'form',
      {
        onSubmit: (event: Event) => {
          event.preventDefault();
          if (draft.trim()) void sendMessage({ text: draft });
          setDraft('');
        },
      },
      [
        h('input', { name: 'message', value: draft, placeholder: 'Ask the concierge', onInput: (event: Event) => setDraft((event.target as HTMLInputElement).value) }),
        h('button', { type: 'submit', disabled: status !== 'ready' }, 'Send'),
      ],
    ),
    h('p', { class: 'status', 'data-status': status }, status),
  ]);
}

render(h(App, null), document.getElementById('app')!);
