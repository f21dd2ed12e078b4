import { Agent, checkOutput, checkRunConfig, fitsStrictSubset, runLocal } from '@arcflow/core';
import { reply, scriptedProvider } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { refusal, untyped } from './refusal.ts';

const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };

describe('output_schema and output_retries (SPEC §11)', () => {
  it('refuses a schema that cannot be enforced, naming the agent', () => {
    expect(refusal(() => new Agent({ name: 'extractor', output_schema: { type: 'objekt' } }))).toMatch(/^agent 'extractor'\.output_schema cannot be enforced: /);
    expect(refusal(() => new Agent({ name: 'extractor', output_schema: untyped({ type: 'object', properites: {} }) }))).toMatch(
      /^agent 'extractor'\.output_schema cannot be enforced: .*properites/,
    );
    expect(refusal(() => new Agent({ name: 'extractor', output_schema: 'json' as never }))).toBe("agent 'extractor'.output_schema must be a JSON Schema object");
    expect(refusal(() => new Agent({ name: 'extractor', output_schema: { $schema: 'http://example.com/mine' } }))).toMatch(/^agent 'extractor'\.output_schema declares \$schema/);
    expect(refusal(() => new Agent({ name: 'extractor', output_schema: schema, output_retries: -1 }))).toBe("agent 'extractor'.output_retries must be an integer >= 0, got -1");
    expect(refusal(() => new Agent(untyped({ name: 'extractor', output_shema: schema })))).toBe(
      "unknown option 'output_shema' in agent 'extractor'; did you mean 'output_schema'?",
    );
  });

  it("refuses a run's bad output settings as config errors", () => {
    const agent = new Agent({ name: 'plain' });
    expect(refusal(() => agent.settingsFor({ output_schema: { type: 'nope' } }))).toMatch(/^config\.output_schema cannot be enforced: /);
    expect(refusal(() => checkRunConfig({ output_retries: 1.5 }))).toBe('config.output_retries must be an integer >= 0, got 1.5');
    expect(refusal(() => checkRunConfig({ output_retry: 1 }))).toBe("config has unknown key 'output_retry'; did you mean 'output_retries'?");
  });

  it('resolves the run over the agent, with retries defaulting to 2, and compiles a schema once per process', () => {
    const agent = new Agent({ name: 'structured', output_schema: schema });
    expect(agent.settings.output).toMatchObject({ schema, retries: 2, strict: true });
    expect(agent.settingsFor({ output_retries: 0 }).output).toMatchObject({ schema, retries: 0 });
    const other = { type: 'array' };
    expect(agent.settingsFor({ output_schema: other }).output).toMatchObject({ schema: other, retries: 2, strict: false });
    expect(new Agent({ name: 'plain' }).settings.output).toBeUndefined();
    expect(new Agent({ name: 'plain', output_retries: 4 }).settings.output).toBeUndefined();
    const first = agent.settingsFor({ output_schema: { type: 'object', required: ['x'] } }).output!;
    const again = agent.settingsFor({ output_schema: { required: ['x'], type: 'object' } }).output!;
    expect(again.check).toBe(first.check);
  });

  it('puts the output schema in the definition hash only when set', () => {
    const plain = new Agent({ name: 'hashed' }).definition_hash;
    expect(new Agent({ name: 'hashed', output_retries: 3 }).definition_hash).toBe(plain);
    const structured = new Agent({ name: 'hashed', output_schema: schema }).definition_hash;
    expect(structured).not.toBe(plain);
    expect(new Agent({ name: 'hashed', output_schema: schema, output_retries: 0 }).definition_hash).not.toBe(structured);
    expect(new Agent({ name: 'hashed', output_schema: { ...schema, required: ['answer'] } }).definition_hash).toBe(structured);
  });

  it('checks an answer: parsed and valid, or a violation without its value', () => {
    const output = new Agent({ name: 'c', output_schema: schema }).settings.output!;
    expect(checkOutput(output, '{"answer":"yes"}')).toEqual({ ok: true, value: { answer: 'yes' } });
    expect(checkOutput(output, '{"answer":"yes","secret":"s3cr3t"}')).toEqual({ ok: false, violation: '(root): unexpected property' });
    expect(checkOutput(output, '')).toEqual({ ok: false, violation: 'output is not valid JSON' });
    expect(checkOutput(output, '{"answer":1e400}')).toEqual({ ok: false, violation: 'output holds a number outside the range JSON numbers can carry' });
    const any = new Agent({ name: 'c', output_schema: {} }).settings.output!;
    expect(checkOutput(any, 'null')).toEqual({ ok: true, value: null });
  });

  it("asks for strict decoding only for schemas in OpenAI's strict subset", () => {
    expect(fitsStrictSubset(schema)).toBe(true);
    const nested = {
      type: 'object',
      properties: { items: { type: 'array', items: { anyOf: [{ type: 'string' }, { $ref: '#/$defs/pair' }] } } },
      required: ['items'],
      additionalProperties: false,
      $defs: { pair: { type: 'object', properties: { a: { type: ['string', 'null'] } }, required: ['a'], additionalProperties: false } },
    };
    expect(fitsStrictSubset(nested)).toBe(true);
    expect(fitsStrictSubset({ type: 'array', items: { type: 'string' } })).toBe(false);
    expect(fitsStrictSubset({ ...schema, additionalProperties: undefined })).toBe(false);
    expect(fitsStrictSubset({ ...schema, required: [] })).toBe(false);
    expect(fitsStrictSubset({ ...schema, properties: { answer: { type: 'string', minLength: 1 } } })).toBe(false);
    expect(fitsStrictSubset({ ...nested, $defs: { pair: { type: 'object', properties: {} } } })).toBe(false);
    let deep: Record<string, unknown> = { type: 'string' };
    for (let level = 0; level < 6; level += 1) deep = { type: 'object', properties: { x: deep }, required: ['x'], additionalProperties: false };
    expect(fitsStrictSubset(deep)).toBe(false);
    // A nullable object must be closed too, and the root may not be an anyOf.
    expect(fitsStrictSubset({ ...schema, properties: { answer: { type: ['object', 'null'], properties: {} } } })).toBe(false);
    expect(fitsStrictSubset({ ...schema, anyOf: [{ type: 'object' }] })).toBe(false);
  });

  it('names the format after the agent, in the characters the name allows', async () => {
    const model = scriptedProvider([reply('{"answer":"ok"}')]);
    const run = await runLocal(new Agent({ name: 'team.extractor', output_schema: schema }), 'go', { provider: model, logger: false });
    expect(run.output_json).toEqual({ answer: 'ok' });
    expect(model.requests[0]?.response_format?.json_schema.name).toBe('team_extractor');
  });
});
