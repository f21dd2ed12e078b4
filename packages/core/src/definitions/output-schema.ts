import { shortHash } from '../canonical.ts';
import { OUTPUT_DEFAULTS } from '../defaults.ts';
import { ConfigError } from '../errors.ts';
import type { JsonSchema } from '../vocabulary/json-schema.ts';
import { type ArgumentCheck, compileSchema } from '../tools/schema.ts';
import { isPlainObject } from '../plain-object.ts';

/** A step's structured output (SPEC §11), resolved once: the schema, compiled, and how many repair calls it allows. */
export interface ResolvedOutput {
  readonly schema: JsonSchema;
  /** 16 hex characters over the schema's canonical JSON (what the definition hash sees of it). */
  readonly schema_hash: string;
  /** Calls the model gets after an answer that fails the schema (`output_retries`). */
  readonly retries: number;
  /** Whether the schema fits OpenAI's strict subset, so `response_format` may ask for strict decoding. */
  readonly strict: boolean;
  /** The violation of an answer's parsed value, path-only; undefined when it is valid. */
  readonly check: ArgumentCheck;
}

/** The chat-completions `response_format` that asks for the final answer in a schema. */
export interface ResponseFormat {
  readonly type: 'json_schema';
  readonly json_schema: { readonly name: string; readonly schema: JsonSchema; readonly strict: boolean };
}

/** Compiled output schemas by hash: a run's `config.output_schema` is resolved by every job of the run, and compiled once per process. */
const compiled = new Map<string, { readonly check: ArgumentCheck; readonly strict: boolean }>();
const MAX_COMPILED = 256;

/**
 * The output settings of a step, or undefined without a schema. The schema is compiled here
 * (ajv, as tool schemas are); a schema that cannot be enforced is refused naming `where`
 * (`agent 'extractor'`, `config`).
 */
export function resolveOutput(schema: unknown, retries: unknown, where: string): ResolvedOutput | undefined {
  const count = retries ?? OUTPUT_DEFAULTS.retries;
  if (!Number.isSafeInteger(count) || (count as number) < 0) throw new ConfigError(`${where}.output_retries must be an integer >= 0, got ${JSON.stringify(count)}`);
  if (schema === undefined) return undefined;
  const subject = `${where}.output_schema`;
  if (!isPlainObject(schema)) throw new ConfigError(`${subject} must be a JSON Schema object`);
  const schema_hash = shortHash(schema);
  let entry = compiled.get(schema_hash);
  if (!entry) {
    entry = { check: compileSchema(subject, schema), strict: fitsStrictSubset(schema as JsonSchema) };
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
    compiled.set(schema_hash, entry);
  }
  return Object.freeze({ schema: schema as JsonSchema, schema_hash, retries: count as number, strict: entry.strict, check: entry.check });
}

/** `response_format` for a step's calls, named after its agent (`.` becomes `_`: the name allows `[A-Za-z0-9_-]{1,64}`). */
export function responseFormatFor(agentName: string, output: ResolvedOutput): ResponseFormat {
  return { type: 'json_schema', json_schema: { name: agentName.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64), schema: output.schema, strict: output.strict } };
}

// OpenAI's strict structured outputs take a subset of JSON Schema: the root an object, every
// object closed (`additionalProperties: false`) with every property required, and only these
// keywords. Kept deliberately narrow: a schema outside it is sent with `strict: false` (the model is
// guided, arcflow validates and asks again), since a strict request with an unsupported schema is
// refused with a 400 and would fail the step.
const STRICT_KEYWORDS: ReadonlySet<string> = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'enum',
  'const',
  'anyOf',
  '$ref',
  '$defs',
  'description',
  'title',
]);
const STRICT_MAX_DEPTH = 5;
const STRICT_MAX_PROPERTIES = 100;

/** Whether a schema fits OpenAI's strict subset (see above), within its documented nesting and size limits. */
export function fitsStrictSubset(schema: JsonSchema): boolean {
  // OpenAI's strict mode takes an object at the root, and no anyOf there.
  if (schema.type !== 'object' || schema.anyOf !== undefined) return false;
  const counted = { properties: 0 };
  return strictNode(schema, 0, counted) && counted.properties <= STRICT_MAX_PROPERTIES;
}

function strictNode(node: unknown, depth: number, counted: { properties: number }): boolean {
  if (!isPlainObject(node)) return false;
  const record = node as Record<string, unknown>;
  if (!Object.keys(record).every((key) => STRICT_KEYWORDS.has(key))) return false;
  const children: unknown[] = [];
  const mayBeObject = record.type === 'object' || (Array.isArray(record.type) && record.type.includes('object'));
  if (record.properties !== undefined || mayBeObject) {
    if (depth >= STRICT_MAX_DEPTH || record.additionalProperties !== false) return false;
    const properties = record.properties ?? {};
    if (!isPlainObject(properties)) return false;
    const names = Object.keys(properties);
    const required = Array.isArray(record.required) ? record.required : [];
    if (required.length !== names.length || !names.every((name) => required.includes(name))) return false;
    counted.properties += names.length;
    children.push(...Object.values(properties).map((child) => [child, depth + 1]));
  }
  if (record.items !== undefined) children.push([record.items, depth]);
  if (record.anyOf !== undefined) {
    if (!Array.isArray(record.anyOf)) return false;
    children.push(...record.anyOf.map((child) => [child, depth]));
  }
  if (record.$defs !== undefined) {
    if (record.$defs === null || typeof record.$defs !== 'object') return false;
    children.push(...Object.values(record.$defs).map((child) => [child, depth]));
  }
  return (children as [unknown, number][]).every(([child, at]) => strictNode(child, at, counted));
}
