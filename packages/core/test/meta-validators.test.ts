import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileSchema } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { GENERATED_DRAFTS, META_VALIDATORS_DIR, metaValidatorSource } from '../../../scripts/meta-validators.ts';
import { type Draft, newAjv } from '../src/tools/drafts.ts';
import { newValidator } from '../src/tools/schema.ts';

/** Schemas a meta-schema refuses (one or several faults), and some it accepts. */
const SCHEMAS: readonly Record<string, unknown>[] = [
  { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
  { type: 'strin' },
  { type: 'object', required: 'word' },
  { type: 'string', minLength: -1 },
  { type: 'object', properties: [] },
  { type: 'object', properties: { a: { type: 'string', minLength: '3' }, b: { enum: 'x' } } },
  { type: 'strin', minimum: 'x', additionalProperties: 'no' },
  { type: 'array', items: 5 },
  { type: 'object', dependentRequired: { a: 'b' } },
  { type: 'object', properties: { a: { $ref: 5 } } },
  { $id: 7, type: 'object' },
  { type: 'string', pattern: '(' },
  { type: 'object', $defs: { word: { type: 'string' } }, properties: { a: { $ref: '#/$defs/word' } } },
  { type: 'object', definitions: { word: { type: 'string' } }, properties: { a: { $ref: '#/definitions/word' } } },
  { anyOf: [{ type: 'string' }, { type: 'numbr' }], allOf: {} },
];

/** What ajv itself says of the schema, compiling the draft's meta-schema as it does by default. */
function ajvVerdict(draft: Draft, schema: Record<string, unknown>): string {
  try {
    newAjv(draft).compile(schema);
    return 'compiled';
  } catch (error) {
    return `cannot be enforced: ${(error as Error).message}`;
  }
}

function arcflowVerdict(schema: Record<string, unknown>): string {
  try {
    compileSchema('s', schema);
    return 'compiled';
  } catch (error) {
    return (error as Error).message.replace(/^s /, '');
  }
}

describe("the meta-schemas' validators compiled ahead", () => {
  it('are the standalone code of the installed ajv with arcflow’s options (else run `npm run meta-validators`)', () => {
    for (const draft of GENERATED_DRAFTS) {
      expect(readFileSync(join(META_VALIDATORS_DIR, draft.metaValidator), 'utf8'), draft.metaValidator).toBe(metaValidatorSource(draft));
    }
  });

  it('accept and refuse what ajv does, with its message, in every draft', () => {
    let refused = 0;
    for (const draft of GENERATED_DRAFTS) {
      for (const schema of SCHEMAS) {
        const declared = { $schema: `${draft.id}#`, ...schema };
        const expected = ajvVerdict(draft, declared);
        if (expected.includes('schema is invalid')) refused += 1;
        expect(arcflowVerdict(declared), JSON.stringify(declared)).toBe(expected);
      }
    }
    // The corpus reaches the meta-schemas: most of it is refused by them, not by the compiler.
    expect(refused).toBeGreaterThan(20);
  });

  it('stand in for the meta-schema: checking a schema compiles no meta-schema', () => {
    const compiledMetaSchemas = (ajv: ReturnType<typeof newAjv>) =>
      Object.values({ ...ajv.schemas, ...ajv.refs }).filter((entry) => typeof entry === 'object' && entry !== null && 'validate' in entry && entry.validate).length;
    for (const draft of GENERATED_DRAFTS) {
      const stock = newAjv(draft);
      stock.compile(SCHEMAS[0]!);
      expect(compiledMetaSchemas(stock), `ajv's own, ${draft.id}`).toBeGreaterThan(0);
      const ajv = newValidator(draft);
      ajv.compile(SCHEMAS[0]!);
      expect(() => ajv.compile(SCHEMAS[1]!)).toThrow(/schema is invalid/);
      expect(compiledMetaSchemas(ajv), draft.id).toBe(0);
    }
  });
});
