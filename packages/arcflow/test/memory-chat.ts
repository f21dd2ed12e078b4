import type { ChatState, ChatStatus, UIMessage } from 'ai';

/** What `useChat` keeps in React state, kept in memory: the AI SDK's own chat logic runs on it. */
export class MemoryChatState implements ChatState<UIMessage> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: UIMessage[] = [];
  pushMessage = (message: UIMessage) => {
    this.messages = [...this.messages, message];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: UIMessage) => {
    this.messages = this.messages.map((each, at) => (at === index ? message : each));
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

/** A message's text parts, joined. */
export const textOf = (message: UIMessage | undefined) =>
  (message?.parts ?? [])
    .filter((part) => part.type === 'text')
    .map((part) => (part as { text: string }).text)
    .join('');
