import { ConfigError, tool } from '@arcflow/core';
import { describe, expect, it } from 'vitest';

const handler = () => 'ok';
const define = (input_schema: Record<string, unknown>, name = 'checked') => tool({ name, description: '', input_schema, handler });

describe('tool input schemas', () => {
  it('never echoes a property name the input chose: only declared names and positions appear', () => {
    const t = define({
      type: 'object',
      properties: { items: { type: 'array', items: { type: 'object', additionalProperties: { type: 'integer' } } } },
      additionalProperties: { type: 'integer' },
    });
    const violation = t.check({ patient_jane_doe_ssn_123456789: 'x', items: [{ another_secret_name: 'y' }] });
    expect(violation).toBe('*: expected integer; items.0.*: expected integer');
    expect(violation).not.toMatch(/jane|secret/);
  });

  it('names every type a property may have: `expected string or number or null`', () => {
    const t = define({ type: 'object', properties: { a: { type: ['string', 'number', 'null'] }, b: { type: ['string', 'integer'] } } });
    expect(t.check({ a: true, b: [] })).toBe('a: expected string or number or null; b: expected string or integer');
  });

  it('enforces formats', () => {
    const t = define({
      type: 'object',
      properties: {
        email: { type: 'string', format: 'email' },
        at: { type: 'string', format: 'date-time' },
        id: { type: 'string', format: 'uuid' },
        ip: { type: 'string', format: 'ipv4' },
        site: { type: 'string', format: 'uri' },
      },
    });
    expect(t.check({ email: 'a@b.example', at: '2026-12-04T10:00:00Z', id: '123e4567-e89b-12d3-a456-426614174000', ip: '10.0.0.1', site: 'https://a.example/x' })).toBeUndefined();
    expect(t.check({ email: 'nope', at: 'yesterday', id: 'u', ip: '999.1.1.1', site: 'not a uri' })).toBe(
      'email: expected format email; at: expected format date-time; id: expected format uuid; ip: expected format ipv4; site: expected format uri',
    );
  });

  it('enforces the keywords of the draft a schema declares (2019-09 and 2020-12 as well as draft-07)', () => {
    for (const $schema of ['https://json-schema.org/draft/2020-12/schema', 'https://json-schema.org/draft/2019-09/schema', undefined]) {
      const t = define({ ...($schema ? { $schema } : {}), type: 'object', properties: { a: {}, b: {} }, dependentRequired: { a: ['b'] }, unevaluatedProperties: false });
      expect(t.check({ a: 1, b: 2 })).toBeUndefined();
      expect(t.check({ a: 1 })).toMatch(/^\(root\): expected to have property b when property a is present$/);
      expect(t.check({ b: 1, chosen_by_input: 2 })).toBe('(root): unexpected property');
    }
    const draft7 = define({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', dependencies: { a: ['b'] } });
    expect(draft7.check({ a: 1 })).toMatch(/property b when property a/);
  });

  it('refuses at definition time, naming the tool, what it cannot enforce', () => {
    expect(() => define({ type: 'string', format: 'phone' }, 'phone_tool')).toThrow(/tool 'phone_tool'.*unknown format "phone"/);
    expect(() => define({ type: 'object', properites: {} }, 'typo_tool')).toThrow(/tool 'typo_tool'.*unknown keyword: "properites"/);
    expect(() => define({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', unevaluatedProperties: false }, 'draft7_tool')).toThrow(
      /tool 'draft7_tool'.*unevaluatedProperties/,
    );
    expect(() => define({ $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' }, 'old_tool')).toThrow(ConfigError);
    expect(() => define({ $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' }, 'old_tool')).toThrow(/tool 'old_tool'.*draft-04/);
  });

  it('lets two tools carry schemas with the same $id', () => {
    define({ $id: 'https://example.com/args', type: 'object' }, 'first');
    expect(() => define({ $id: 'https://example.com/args', type: 'object', required: ['x'] }, 'second')).not.toThrow();
  });
});
