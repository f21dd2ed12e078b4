import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../src/vocabulary/messages.ts';
import { messagesByteSize } from '../src/loop/decide.ts';

describe("a request's prompt size", () => {
  it("is the byte size of the messages' JSON, computed from each message once", () => {
    const call = { id: 'call_1', type: 'function' as const, function: { name: 'f', arguments: '{"q":"ø"}' } };
    const messages: ChatMessage[] = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'héllo 🌍 "quoted"\n' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: 'x'.repeat(4096) },
    ];
    const exact = (list: readonly ChatMessage[]) => Buffer.byteLength(JSON.stringify(list), 'utf8');
    for (let count = 0; count <= messages.length; count += 1) expect(messagesByteSize(messages.slice(0, count))).toBe(exact(messages.slice(0, count)));
    // Sized again (remembered per message object), and grown: the same answer as serialising it all.
    const grown = [...messages, { role: 'user', content: 'more' } as const];
    expect(messagesByteSize(grown)).toBe(exact(grown));
  });
});
