import type { StreamChunk } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { UiMessageTranslator, uiFrames } from '../src/ui-message-stream.ts';

const text = (offset: number, delta: string, iteration = 1): StreamChunk => ({ offset, type: 'text', step_id: 's1', iteration, attempt: 1, delta }) as StreamChunk;

describe('the UI message stream frames, made once for a fan-out (SPEC §19)', () => {
  it('gives translators in the same state the same frame bytes for the same chunk, as translating each would', () => {
    const chunks: StreamChunk[] = [
      text(1, 'Hel'),
      text(2, 'lo'),
      { offset: 3, type: 'tool_call', step_id: 's1', iteration: 1, tool_call_id: 'c1', tool_name: 'look' } as StreamChunk,
      { offset: 4, type: 'tool_result', step_id: 's1', iteration: 1, tool_call_id: 'c1', status: 'completed' } as StreamChunk,
      text(5, 'done', 2),
      { offset: 6, type: 'end', status: 'completed' } as StreamChunk,
    ];
    const alone = new UiMessageTranslator('run_1');
    const expected = chunks.map((chunk) => uiFrames(chunk.offset, alone.translate(chunk)));
    const a = new UiMessageTranslator('run_1');
    const b = new UiMessageTranslator('run_1');
    for (const [index, chunk] of chunks.entries()) {
      const frame = a.frames(chunk);
      expect(b.frames(chunk)).toBe(frame);
      expect(frame?.bytes.toString() ?? '').toBe(expected[index]);
    }
    // A translator that read the same chunks as copies (its own read of what is stored) says the same.
    const c = new UiMessageTranslator('run_1');
    expect(chunks.map((chunk) => c.frames({ ...chunk })?.bytes.toString() ?? '')).toEqual(expected);
  });

  it('keeps translators in different states apart for the same chunk', () => {
    const fresh = new UiMessageTranslator('run_2');
    const later = new UiMessageTranslator('run_2');
    later.frames(text(1, 'a'));
    const chunk = text(2, 'b');
    // One opens the message and its text part; the other only adds to the part it has open.
    expect(fresh.frames(chunk)!.bytes.toString()).toContain('"type":"start"');
    expect(later.frames(chunk)!.bytes.toString()).not.toContain('"type":"start"');
  });
});
