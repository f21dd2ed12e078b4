import { Agent, runLocal, stderrLogger, tool } from '@arcflow/core';
import { reply, scriptedProvider, toolCalls } from '@arcflow/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';

afterEach(() => vi.restoreAllMocks());

function captureStderr(): string[] {
  const lines: string[] = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => (lines.push(String(chunk)), true));
  return lines;
}

describe('the default log', () => {
  it('writes one JSON line with a timestamp for any thrown value, circular or BigInt included', () => {
    const lines = captureStderr();
    const circular: Record<string, unknown> = { name: 'loop' };
    circular.self = circular;
    const log = stderrLogger('test');
    log.error('tool handler failed', { error: circular, tool: 't' });
    log.error('tool handler failed', { error: 10n });
    log.error('tool handler failed', { error: new TypeError('bad') });
    expect(lines).toHaveLength(3);
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(parsed[0]).toMatchObject({ level: 'error', component: 'test', message: 'tool handler failed', tool: 't' });
    expect(String(parsed[0]!.error)).toContain('[Circular');
    expect(parsed[1]!.error).toBe('10n');
    expect(parsed[2]!.error).toMatchObject({ name: 'TypeError', message: 'bad' });
    expect(Date.parse(String(parsed[0]!.time))).not.toBeNaN();
  });

  it('keeps runLocal going when handlers throw values JSON cannot hold: each call fails once, the run completes', async () => {
    const lines = captureStderr();
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const throwsBigInt = tool({
      name: 'big',
      description: '',
      input_schema: { type: 'object' },
      handler: () => {
        throw 10n;
      },
    });
    const throwsCircular = tool({
      name: 'circ',
      description: '',
      input_schema: { type: 'object' },
      handler: () => {
        throw circular;
      },
    });
    const returnsBigInt = tool({ name: 'ret', description: '', input_schema: { type: 'object' }, handler: () => ({ n: 1n }) });
    const model = scriptedProvider([
      toolCalls([
        { name: 'big', args: {} },
        { name: 'circ', args: {} },
        { name: 'ret', args: {} },
      ]),
      reply('done'),
    ]);
    const run = await runLocal(new Agent({ name: 'throwers', tools: [throwsBigInt, throwsCircular, returnsBigInt] }), 'go', { provider: model });
    expect(run.status).toBe('completed');
    expect(run.events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual([
      'tool_error',
      'tool_error',
      'tool_error',
    ]);
    expect(lines.filter((line) => line.includes('tool handler failed'))).toHaveLength(3);
  });

  it("gives a handler a ctx.log that adds its call's ids to every line", async () => {
    const lines: Record<string, unknown>[] = [];
    const keep = (message: string, fields?: Record<string, unknown>) => lines.push({ message, ...fields });
    const talker = tool({ name: 'talker', description: '', input_schema: { type: 'object' }, handler: (_args, ctx) => (ctx.log.info('working', { step: 2 }), 'ok') });
    const model = scriptedProvider([toolCalls([{ name: 'talker', args: {}, id: 'k1' }]), reply('done')]);
    const run = await runLocal(new Agent({ name: 'talkative', tools: [talker] }), 'go', { provider: model, logger: { info: keep, warn: keep, error: keep } });
    expect(lines).toEqual([{ message: 'working', run_id: run.run_id, step_id: 's1', iteration: 1, tool_call_id: 'k1', tool: 'talker', step: 2 }]);
  });
});
