// `useChat` for Preact, over the AI SDK's own chat logic (`AbstractChat`, what `@ai-sdk/react`'s
// `useChat` wraps): the same options (`transport`, `onToolCall`, `sendAutomaticallyWhen`,
// `resume`) and the same methods. In a React app, use `useChat` from `@ai-sdk/react` instead.
import { AbstractChat, type ChatInit, type ChatState, type ChatStatus, type UIMessage } from 'ai';
import { useEffect, useMemo, useState } from 'preact/hooks';

class ObservedState implements ChatState<UIMessage> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: UIMessage[] = [];
  constructor(private readonly changed: () => void) {}
  pushMessage = (message: UIMessage) => {
    this.messages = [...this.messages, message];
    this.changed();
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
    this.changed();
  };
  replaceMessage = (index: number, message: UIMessage) => {
    this.messages = this.messages.map((each, at) => (at === index ? message : each));
    this.changed();
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

class Chat extends AbstractChat<UIMessage> {
  constructor(
    init: Omit<ChatInit<UIMessage>, 'messages'>,
    readonly observed: ObservedState,
  ) {
    super({ ...init, state: observed });
  }
  protected override setStatus(update: { status: ChatStatus; error?: Error }): void {
    super.setStatus(update);
    this.observed.status = update.status;
    this.observed.error = update.error;
    this.observed.snapshot(undefined);
  }
}

/** The chat for `init.id`; with `resume`, the stream of its active run (after a reload) is picked up on mount. */
export function useChat(init: Omit<ChatInit<UIMessage>, 'messages'> & { readonly resume?: boolean }) {
  const [, rerender] = useState(0);
  const chat = useMemo(() => new Chat(init, new ObservedState(() => rerender((n) => n + 1))), [init.id]);
  useEffect(() => {
    if (init.resume) void chat.resumeStream();
  }, [chat]);
  useEffect(() => {
    // The status changes outside the message list (submitted, streaming, ready): shown on the next frame.
    const timer = setInterval(() => rerender((n) => n + 1), 100);
    return () => clearInterval(timer);
  }, [chat]);
  return {
    messages: chat.messages,
    status: chat.status,
    sendMessage: chat.sendMessage,
    addToolOutput: chat.addToolOutput,
    addToolApprovalResponse: chat.addToolApprovalResponse,
  };
}
