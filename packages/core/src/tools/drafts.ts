import { createRequire } from 'node:module';
import type { Ajv, Options } from 'ajv';

// ajv is CommonJS: a synchronous require keeps `tool()` synchronous; Node caches it after the first.
const load = createRequire(import.meta.url);

// Strict about what a schema asks for: a keyword or `format` that cannot be enforced is a startup
// error, never silently ignored. Union types, tuples and `required` of undeclared properties are
// valid JSON Schema, so those strict checks stay off.
const AJV_OPTIONS: Options = {
  allErrors: true,
  strict: true,
  strictTypes: false,
  strictTuples: false,
  strictRequired: false,
  allowUnionTypes: true,
  // Two tools may carry schemas with the same `$id`; each is compiled on its own.
  addUsedSchema: false,
};

/** A JSON Schema draft arcflow enforces: its ajv class, and its meta-schema's validator compiled ahead. */
export interface Draft {
  /** The meta-schema's `$id`: what a schema's `$schema` names, without the trailing `#`. */
  readonly id: string;
  /** The ajv module that enforces it, and the class that module exports. */
  readonly module: 'ajv' | 'ajv/dist/2019.js' | 'ajv/dist/2020.js';
  readonly className: 'Ajv' | 'Ajv2019' | 'Ajv2020';
  /** The file in `meta-validators/` (beside this one) holding its meta-schema's validator, as ajv's standalone code. */
  readonly metaValidator: string;
}

export const DRAFT_07: Draft = { id: 'http://json-schema.org/draft-07/schema', module: 'ajv', className: 'Ajv', metaValidator: 'draft-07.cjs' };
export const DRAFT_2019_09: Draft = { id: 'https://json-schema.org/draft/2019-09/schema', module: 'ajv/dist/2019.js', className: 'Ajv2019', metaValidator: 'draft-2019-09.cjs' };
export const DRAFT_2020_12: Draft = { id: 'https://json-schema.org/draft/2020-12/schema', module: 'ajv/dist/2020.js', className: 'Ajv2020', metaValidator: 'draft-2020-12.cjs' };

/**
 * The draft a schema declares with `$schema` (without its trailing `#`). Without `$schema`,
 * draft 2019-09, which also reads every draft-07 keyword (`dependencies`, `items` as a list).
 */
export const DRAFTS: Readonly<Record<string, Draft>> = {
  '': DRAFT_2019_09,
  [DRAFT_07.id]: DRAFT_07,
  [DRAFT_2019_09.id]: DRAFT_2019_09,
  [DRAFT_2020_12.id]: DRAFT_2020_12,
};

/** A new ajv for the draft, with arcflow's options (and `extra`) and every format of ajv-formats. */
export function newAjv(draft: Draft, extra: Options = {}): Ajv {
  const classes = load(draft.module) as Record<Draft['className'], new (options: Options) => Ajv>;
  const ajv = new classes[draft.className]({ ...AJV_OPTIONS, ...extra });
  (load('ajv-formats') as typeof import('ajv-formats')).default(ajv);
  return ajv;
}
