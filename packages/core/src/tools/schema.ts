import { createRequire } from 'node:module';
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import { ConfigError } from '../errors.ts';
import { DRAFTS, type Draft, newAjv } from './drafts.ts';
import type { JsonSchema } from '../vocabulary/json-schema.ts';

/** Checks arguments against a compiled schema: `undefined` when valid, else the violation text. */
export type ArgumentCheck = (args: unknown) => string | undefined;

// ajv is loaded when the first schema is compiled, not when core is imported: a process that
// defines no tool (`arcflow get`, a backend that only enqueues) never pays its ~60 ms.
const load = createRequire(import.meta.url);

const validators = new Map<string, Ajv>();

function validatorFor(subject: string, declared: unknown): Ajv {
  const key = typeof declared === 'string' ? declared.replace(/#$/, '') : declared === undefined ? '' : undefined;
  const draft = key === undefined ? undefined : DRAFTS[key];
  if (key === undefined || !draft) {
    throw new ConfigError(`${subject} declares $schema ${JSON.stringify(declared)}, which arcflow cannot enforce; use draft-07, 2019-09 or 2020-12, or leave $schema out`);
  }
  let ajv = validators.get(key);
  if (!ajv) {
    ajv = newValidator(draft);
    validators.set(key, ajv);
  }
  return ajv;
}

/**
 * Loads ajv and makes the validator of schemas that declare no `$schema`, as the first such
 * `tool()` would. For a process that must have its modules loaded before something else is
 * registered: the worker, before the TypeScript loader every later import passes through.
 */
export function loadSchemaValidator(): void {
  validatorFor('a schema', undefined);
}

/**
 * An ajv for one draft. ajv checks each schema it compiles against the draft's
 * meta-schema (`validateSchema`), and would first compile that meta-schema: 45–75 ms of a
 * worker's start for one tool. This one checks with the meta-schema's validator compiled ahead
 * (ajv's standalone code of the same meta-schema and options, `npm run meta-validators`), at the
 * same point and with ajv's own message.
 */
export function newValidator(draft: Draft): Ajv {
  const ajv = newAjv(draft);
  const metaValidate = load(`./meta-validators/${draft.metaValidator}`) as ValidateFunction;
  ajv.validateSchema = (schema, throwOrLogError) => {
    if (typeof schema === 'boolean') return true;
    const valid = metaValidate(schema) as boolean;
    ajv.errors = metaValidate.errors;
    if (!valid && throwOrLogError) throw new Error(`schema is invalid: ${ajv.errorsText(metaValidate.errors)}`);
    return valid;
  };
  return ajv;
}

/**
 * Compiles a schema once: a tool's input schema, an agent's or a run's output schema. Refused,
 * naming `subject` (`tool 'get_weather': input_schema`): a schema that is not an object, is
 * invalid for its draft, or uses a keyword or format the validator cannot enforce.
 */
export function compileSchema(subject: string, schema: unknown): ArgumentCheck {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
    throw new ConfigError(`${subject} must be a JSON Schema object`);
  }
  const ajv = validatorFor(subject, (schema as JsonSchema).$schema);
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema);
  } catch (error) {
    throw new ConfigError(`${subject} cannot be enforced: ${(error as Error).message}`);
  }
  const declared = declaredNames(schema);
  return (args) => (validate(args) ? undefined : describeViolations(validate.errors ?? [], args, declared));
}

/** Every property name the schema itself spells out, anywhere in it. */
function declaredNames(schema: unknown): ReadonlySet<string> {
  const names = new Set<string>();
  const stack: unknown[] = [schema];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    const record = node as Record<string, unknown>;
    for (const keyword of ['properties', 'dependentRequired', 'dependentSchemas', 'dependencies']) {
      const value = record[keyword];
      if (value && typeof value === 'object' && !Array.isArray(value)) for (const name of Object.keys(value)) names.add(name);
    }
    if (Array.isArray(record.required)) for (const name of record.required) if (typeof name === 'string') names.add(name);
    stack.push(...Object.values(record));
  }
  return names;
}

/** Where a property name not declared by the schema stands in a violation's path. */
export const UNDECLARED_PROPERTY = '*';

/**
 * Describes schema violations by path and expectation, never by value: `city: expected string`.
 * A path shows only names the schema declares and array positions; a property name that only
 * the input chose is shown as `*`, and unexpected properties are not named at all.
 */
export function describeViolations(errors: readonly ErrorObject[], args: unknown, declared: ReadonlySet<string>): string {
  const parts = errors.slice(0, 5).map((error) => describeOne(error, pathOf(error.instancePath, args, declared)));
  return [...new Set(parts)].join('; ');
}

/** The path of a value in the arguments, as shown: declared names, indexes, `*` for other names. */
function pathOf(pointer: string, args: unknown, declared: ReadonlySet<string>): string[] {
  const shown: string[] = [];
  let at: unknown = args;
  for (const segment of pointer.split('/').slice(1).map(unescapePointer)) {
    const inArray = Array.isArray(at);
    shown.push(inArray || declared.has(segment) ? segment : UNDECLARED_PROPERTY);
    at = at !== null && typeof at === 'object' ? (at as Record<string, unknown>)[segment] : undefined;
  }
  return shown;
}

function describeOne(error: ErrorObject, path: readonly string[]): string {
  const at = (suffix?: string) => [...path, suffix].filter(Boolean).join('.') || '(root)';
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'type':
      return `${at()}: expected ${(Array.isArray(params.type) ? params.type : String(params.type).split(',')).join(' or ')}`;
    case 'required':
      return `${at(String(params.missingProperty))}: required`;
    case 'enum':
      return `${at()}: expected one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${at()}: expected ${JSON.stringify(params.allowedValue)}`;
    case 'additionalProperties':
    case 'unevaluatedProperties':
      return `${at()}: unexpected property`;
    case 'format':
      return `${at()}: expected format ${String(params.format)}`;
    default:
      return `${at()}: expected to ${error.message?.replace(/^must /, '') ?? `satisfy ${error.keyword}`}`;
  }
}

function unescapePointer(segment: string): string {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~');
}
