import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Agent, ConfigError, type KnownKeys, type ModelProvider, type Pricing, type Workflow, checkKnownKeys, isPlainObject } from '@arcflow/core';
import { useTypeScriptLoader } from './typescript-loader.ts';

/** What a module may pass to the engine as `export const worker_options = { … }` (SPEC §14, §16). */
export interface ModuleWorkerOptions {
  /** Named providers, for agents (and fallbacks) that name one with `provider`. */
  readonly providers?: Readonly<Record<string, ModelProvider>>;
  /** Each tenant's share of the queues (SPEC §14). */
  readonly tenant_weights?: Readonly<Record<string, number>>;
  /** Each tenant's limits (SPEC §14). */
  readonly tenant_limits?: Readonly<Record<string, { max_active_runs?: number; runs_per_minute?: number }>>;
  /** Each model's price, USD per million tokens (SPEC §14). */
  readonly pricing?: Pricing;
  /** Each tenant's cost budget of a UTC day (SPEC §14). */
  readonly tenant_budgets?: Readonly<Record<string, { max_cost_usd_per_day?: number }>>;
}

const WORKER_OPTIONS_KEYS = { providers: true, tenant_weights: true, tenant_limits: true, pricing: true, tenant_budgets: true } as const satisfies KnownKeys<ModuleWorkerOptions>;

export interface LoadedModule {
  readonly definitions: (Agent | Workflow)[];
  /** A `provider` the module exports, used when no OpenAI settings are in the environment. */
  readonly provider: ModelProvider | undefined;
  /** The module's `worker_options`, checked. */
  readonly worker_options: ModuleWorkerOptions;
}

const isDefinition = (value: unknown): value is Agent | Workflow =>
  typeof value === 'object' && value !== null && ((value as { kind?: unknown }).kind === 'agent' || (value as { kind?: unknown }).kind === 'workflow');

const isProvider = (value: unknown): value is ModelProvider =>
  typeof value === 'object' && value !== null && typeof (value as ModelProvider).complete === 'function' && typeof (value as ModelProvider).id === 'string';

/** A file TypeScript syntax may be in: these are imported with a TypeScript loader registered. */
const TYPESCRIPT_FILE = /\.(?:ts|mts|cts|tsx)$/;

/**
 * The name Node 23 and later give the whole `module.exports` of a CommonJS module imported from
 * ES module code, beside `default` (which holds the same object).
 */
const COMMONJS_EXPORTS = 'module.exports';

/**
 * Why the import failed, in words that say what to do. A `.ts` file in a package without
 * `"type": "module"` may be loaded as CommonJS, and Node's error for that names a require cycle.
 */
function loadFailure(error: NodeJS.ErrnoException): string {
  if (error.code === 'ERR_REQUIRE_CYCLE_MODULE' || error.code === 'ERR_REQUIRE_ESM') {
    return 'it is an ES module inside a CommonJS package; add "type": "module" to its package.json, or name it .mts';
  }
  return error.message;
}

/**
 * The values a module offers: its named exports, and the properties of an object it exports as
 * `default` — which is how a CommonJS module's `module.exports` arrives (Node names its
 * properties only when it can see them without running the file), and a form ES modules use too.
 */
function exportedValues(exports: Record<string, unknown>): unknown[] {
  const values = Object.entries(exports)
    .filter(([name]) => name !== COMMONJS_EXPORTS)
    .map(([, value]) => value);
  const object = exports.default;
  if (isPlainObject(object) && !isDefinition(object)) values.push(...Object.values(object));
  return values;
}

/** The sentence for a module that loaded but offered no definition: what Node saw, and what to do. */
function nothingExported(path: string, exports: Record<string, unknown>): string {
  if (COMMONJS_EXPORTS in exports || /\.c[jt]s$/.test(path)) {
    return `module '${path}' exports no Agent or Workflow: Node loaded it as CommonJS, and its module.exports holds none (assign them to module.exports, or make it an ES module: "type": "module" in its package.json, or the .mjs/.mts extension)`;
  }
  const names = Object.keys(exports);
  return names.length === 0
    ? `module '${path}' exports no Agent or Workflow: it exports nothing`
    : `module '${path}' exports no Agent or Workflow (it exports ${names.map((name) => `'${name}'`).join(', ')}; export the new Agent(…) and new Workflow(…) values themselves)`;
}

/**
 * Imports a user module and collects every Agent and Workflow it exports: named or default,
 * single or in arrays, from an ES module or a CommonJS one. A TypeScript file is imported with
 * tsx registered first (only then, so arcflow's own compiled code never passes through it).
 */
export async function loadModule(path: string): Promise<LoadedModule> {
  let exports: Record<string, unknown>;
  // Said plainly, rather than as Node's "cannot find module … imported from <arcflow's own file>".
  if (!existsSync(resolve(path))) throw new ConfigError(`cannot load module '${path}': there is no file ${resolve(path)}`);
  try {
    if (TYPESCRIPT_FILE.test(path)) await useTypeScriptLoader(resolve(path));
    exports = await import(pathToFileURL(resolve(path)).href);
  } catch (error) {
    throw new ConfigError(`cannot load module '${path}': ${loadFailure(error as NodeJS.ErrnoException)}`);
  }
  const definitions = new Set<Agent | Workflow>();
  for (const value of exportedValues(exports)) {
    for (const item of Array.isArray(value) ? value : [value]) if (isDefinition(item)) definitions.add(item);
  }
  if (definitions.size === 0) throw new ConfigError(nothingExported(path, exports));
  const fromDefault = exports.default as { provider?: unknown; worker_options?: unknown } | null | undefined;
  const provider = exports.provider ?? fromDefault?.provider;
  return {
    definitions: [...definitions],
    provider: isProvider(provider) ? provider : undefined,
    worker_options: checkWorkerOptions(exports.worker_options ?? fromDefault?.worker_options, path),
  };
}

/**
 * A module's `worker_options`: an object of known keys. What each key holds is the engine's to
 * check (`startWorker` refuses a `providers` entry that is not a model provider).
 */
function checkWorkerOptions(value: unknown, path: string): ModuleWorkerOptions {
  if (value === undefined) return {};
  const where = `worker_options of '${path}'`;
  if (!isPlainObject(value)) throw new ConfigError(`${where} must be an object`);
  checkKnownKeys(value, WORKER_OPTIONS_KEYS, where, 'definition');
  return value as ModuleWorkerOptions;
}
