import { describe, expect, it } from 'vitest';
import { formatEvent, formatMessage, formatRun, printable, printableText } from '../src/format.ts';
import { renderInspectTree } from '../src/inspect.ts';

describe('terminal output', () => {
  it('shows control characters as escapes, so names from outside cannot forge lines or colours', () => {
    expect(printable('a\nb\u001b[31mc\u0085d\u2028')).toBe('a\\x0ab\\x1b[31mc\\x85d\\u2028');
    const line = formatEvent({
      seq: 3,
      kind: 'ToolCallFailed',
      run_id: 'run_1',
      step_id: 's1',
      iteration: 1,
      ts: 0,
      tool_name: 'x\n   4  RunCompleted',
      tool_call_id: 'c',
      duration_ms: 0,
      error_code: 'unknown_tool',
    } as never);
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toContain('tool_name=x\\x0a   4  RunCompleted');
  });

  it('escapes inspect trees too', () => {
    const tree = renderInspectTree(
      { run_id: 'run_1', status: 'completed', usage: { input: 0, output: 0, total: 0 }, iterations: 1, created_at: 0, finished_at: 1 },
      [
        {
          seq: 1,
          kind: 'ToolCallFailed',
          run_id: 'run_1',
          step_id: 's1',
          iteration: 1,
          ts: 0,
          tool_name: 'evil\u001b[2J',
          tool_call_id: 'c',
          duration_ms: 0,
          error_code: 'unknown_tool',
        } as never,
      ],
      new Map(),
    );
    expect(tree).not.toMatch(/\u001b/);
    expect(tree).toContain('evil\\x1b[2J');
  });

  it("heads an inspect tree with the run's status, and its duration once it has ended", () => {
    const head = (run: object) =>
      renderInspectTree({ run_id: 'run_1', usage: { input: 0, output: 0, total: 0 }, iterations: 0, created_at: 0, ...run } as never, [], new Map()).split('\n')[0];
    expect(head({ status: 'queued' })).toBe('run run_1  queued  tokens 0/0/0');
    expect(head({ status: 'completed', finished_at: 42 })).toBe('run run_1  completed  42 ms  tokens 0/0/0');
  });
});

describe('run records for people', () => {
  const record = { run_id: 'run_1', status: 'completed', usage: { input: 1, output: 2, total: 3 }, iterations: 1, created_at: 0, finished_at: 5 } as const;

  it("prints a model's answer as text: its line breaks and tabs stay, other control characters are escaped", () => {
    const shown = formatRun({ ...record, output: 'Oslo:\n\t- 18°C\r\n- rain\u001b[2J' });
    expect(shown).toContain('output     Oslo:\n           \t- 18°C\n           - rain\\x1b[2J');
    expect(shown).not.toContain('\\x0a');
    expect(printableText('a\rb\nc\u0007')).toBe('a\\x0db\nc\\x07');
    expect(formatMessage({ role: 'assistant', content: 'one\ntwo' })).toBe('assistant: one\ntwo');
  });

  it('says where a steering run sent its input', () => {
    expect(formatRun({ ...record, iterations: 0, steered_into: 'run_target' })).toContain(
      "status     completed (steered into run_target: its input joined that run's conversation)",
    );
  });
});
