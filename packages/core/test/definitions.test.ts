import { Agent, ConfigError, Workflow, canonicalJson, checkExecConfig, shortHash, tool, truncateResult } from '@arcflow/core';
import { describe, expect, it } from 'vitest';

const schema = { type: 'object', properties: { units: { enum: ['c', 'f'], type: 'string' }, city: { type: 'string' } }, required: ['city'] };
const handler = () => 'ok';

describe('tool()', () => {
  it('hashes the canonical schema: first 16 hex chars of SHA-256, independent of key order', () => {
    const a = tool({ name: 'a', description: '', input_schema: schema, handler });
    const b = tool({
      name: 'b',
      description: '',
      input_schema: { required: ['city'], properties: { city: { type: 'string' }, units: { type: 'string', enum: ['c', 'f'] } }, type: 'object' },
      handler,
    });
    expect(a.input_schema_hash).toMatch(/^[0-9a-f]{16}$/);
    expect(a.input_schema_hash).toBe(b.input_schema_hash);
    expect(canonicalJson(schema)).toBe('{"properties":{"city":{"type":"string"},"units":{"enum":["c","f"],"type":"string"}},"required":["city"],"type":"object"}');
    expect(a.input_schema_hash).toBe(shortHash(schema));
  });

  it('refuses an invalid schema at definition time, naming the tool', () => {
    expect(() => tool({ name: 'broken_tool', description: '', input_schema: { type: 'nonsense' }, handler })).toThrow(ConfigError);
    expect(() => tool({ name: 'broken_tool', description: '', input_schema: { type: 'nonsense' }, handler })).toThrow(/broken_tool/);
  });

  it('refuses bad names and options', () => {
    expect(() => tool({ name: 'has space', description: '', input_schema: schema, handler })).toThrow(/tool name/);
    expect(() => tool({ name: 't', description: '', input_schema: schema, handler, timeout_ms: 0 })).toThrow(/'t': timeout_ms/);
    expect(() => tool({ name: 't', description: '', input_schema: schema, handler, concurrency: 1.5 })).toThrow(/concurrency/);
  });

  it('describes violations by path and expectation, never by value', () => {
    const t = tool({ name: 't', description: '', input_schema: { ...schema, additionalProperties: false }, handler });
    expect(t.check({ city: 42 })).toBe('city: expected string');
    expect(t.check({})).toBe('city: required');
    expect(t.check({ city: 'x', units: 'kelvin' })).toBe('units: expected one of "c", "f"');
    expect(t.check({ city: 'x', secret_key_name: 1 })).toBe('(root): unexpected property');
    expect(t.check({ city: 'Oslo' })).toBeUndefined();
  });
});

describe('Agent', () => {
  const t = tool({ name: 't', description: '', input_schema: schema, handler });

  it('applies defaults and run overrides key by key', () => {
    const agent = new Agent({ name: 'a', tools: [t], tool_execution: { max_iterations: 5 } });
    expect(agent.settings).toMatchObject({ mode: 'llm_select', max_iterations: 5, on_max_iterations: 'fail', loop_detection: { window: 3, threshold: 2, action: 'inject' } });
    expect(agent.settingsFor({ tool_execution: { on_max_iterations: 'final_answer' } })).toMatchObject({ max_iterations: 5, on_max_iterations: 'final_answer' });
    expect(agent.settingsFor({ tool_execution: { max_iterations: undefined } }).max_iterations).toBe(5);
    expect(agent.settingsFor({ loop_detection: false }).loop_detection).toBe(false);
  });

  it('refuses invalid configs with a message naming the key', () => {
    expect(() => new Agent({ name: 'a', tool_execution: { max_iterations: 0 } })).toThrow(/max_iterations must be an integer >= 1/);
    expect(() => new Agent({ name: 'a', tool_execution: { mode: 'eager' as never } })).toThrow(/mode/);
    expect(() => new Agent({ name: 'a', loop_detection: { threshold: 5, window: 3 } })).toThrow(/threshold/);
    expect(() => new Agent({ name: 'a', tools: [t, t] })).toThrow(/duplicate tool 't'/);
    expect(() => new Agent({ name: 'a' }).settingsFor({ tool_execution: { max_iters: 3 } })).toThrow(/unknown key 'max_iters'/);
    expect(() => new Agent({ name: 'bad name!' })).toThrow(/agent name/);
    // Whole numbers past what a double holds exactly are not whole numbers to count with.
    expect(() => new Agent({ name: 'a', tool_execution: { max_iterations: 1e300 } })).toThrow(/max_iterations must be an integer >= 1, got 1e\+300/);
    expect(() => tool({ name: 'r', description: 'x', input_schema: { type: 'object' }, handler: () => 'ok', retries: 2 ** 60 })).toThrow(/retries must be an integer >= 0/);
  });

  it('refuses a tool timeout no timer can keep and an approval wait Redis could not expire', () => {
    const timed = (extra: Record<string, unknown>) => () =>
      tool({ name: 'slow', description: 'x', input_schema: { type: 'object' }, handler: () => 'ok', ...extra } as Parameters<typeof tool>[0]);
    expect(timed({ timeout_ms: 3_000_000_000 })).toThrow("tool 'slow': timeout_ms must be at most 2147483647 (about 24.8 days), got 3000000000");
    expect(timed({ needs_approval: true, approval_timeout_ms: 1e300 })).toThrow(/tool 'slow': approval_timeout_ms must be an integer from 1 to 2592000000 \(30 days\)/);
    expect(timed({ timeout_ms: 2_147_483_647, needs_approval: true, approval_timeout_ms: 2_592_000_000 })().timeout_ms).toBe(2_147_483_647);
  });
});

describe('Workflow', () => {
  const agent = new Agent({ name: 'a' });
  it('accepts a DAG', () => {
    const workflow = new Workflow({
      name: 'w',
      steps: [
        { id: 's1', agent },
        { id: 's2', agent, depends_on: ['s1'] },
      ],
    });
    expect(workflow.steps.map((step) => step.id)).toEqual(['s1', 's2']);
  });
  it('refuses duplicate ids, unknown dependencies and cycles, naming them', () => {
    expect(
      () =>
        new Workflow({
          name: 'w',
          steps: [
            { id: 's1', agent },
            { id: 's1', agent },
          ],
        }),
    ).toThrow("duplicate step id 's1'");
    expect(() => new Workflow({ name: 'w', steps: [{ id: 's1', agent, depends_on: ['s9'] }] })).toThrow("step 's1' depends on unknown step 's9'");
    expect(
      () =>
        new Workflow({
          name: 'w',
          steps: [
            { id: 'a', agent, depends_on: ['c'] },
            { id: 'b', agent, depends_on: ['a'] },
            { id: 'c', agent, depends_on: ['b'] },
          ],
        }),
    ).toThrow('dependency cycle a -> c -> b -> a');
  });
});

describe('results and test mode', () => {
  it('cuts UTF-8 results on a character boundary', () => {
    const text = 'é'.repeat(100); // 200 bytes
    const cut = truncateResult(text, 101);
    expect(cut.startsWith('é'.repeat(50))).toBe(true);
    expect(cut).toContain('[result truncated: 100 of 200 bytes cut]');
    expect(truncateResult('short', 64)).toBe('short');
  });

  it('refuses malformed exec_config', () => {
    expect(() => checkExecConfig({ test: { steps: { s1: { nothing: true } } } })).toThrow(/exec_config.test.steps.s1/);
    expect(() => checkExecConfig({ test: { steps: { s1: { responses: [{ tool_calls: [{}] }] } } } })).toThrow(/responses\[0\]/);
    expect(() => checkExecConfig({ test: { steps: { s1: { responses: [{ output: 'x' }, { tool_calls: [] }] } } } })).toThrow(
      'exec_config.test.steps.s1.responses[1].tool_calls must name at least one call',
    );
    expect(checkExecConfig({ test: { steps: { s1: { output: 'x' } } } })).toBeTruthy();
  });
});
