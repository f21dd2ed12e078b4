import { describe, expect, it } from 'vitest';
import { formatEvent, printable } from '../src/format.ts';
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
});
