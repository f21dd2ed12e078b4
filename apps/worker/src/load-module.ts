import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Agent, ConfigError, type ModelProvider, type Workflow } from '@arcflow/core';

export interface LoadedModule {
  readonly definitions: (Agent | Workflow)[];
  /** A `provider` the module exports, used when no OpenAI settings are in the environment. */
  readonly provider: ModelProvider | undefined;
}

const isDefinition = (value: unknown): value is Agent | Workflow =>
  typeof value === 'object' && value !== null && ((value as { kind?: unknown }).kind === 'agent' || (value as { kind?: unknown }).kind === 'workflow');

const isProvider = (value: unknown): value is ModelProvider =>
  typeof value === 'object' && value !== null && typeof (value as ModelProvider).complete === 'function' && typeof (value as ModelProvider).id === 'string';

/**
 * Why the import failed, in words that say what to do. A `.ts` file in a package without
 * `"type": "module"` is loaded as CommonJS, and Node's error for that names a require cycle.
 */
function loadFailure(error: NodeJS.ErrnoException): string {
  if (error.code === 'ERR_REQUIRE_CYCLE_MODULE' || error.code === 'ERR_REQUIRE_ESM') {
    return 'it is an ES module inside a CommonJS package; add "type": "module" to its package.json, or name it .mts';
  }
  return error.message;
}

/** Imports a user module and collects every Agent and Workflow it exports: named or default, single or in arrays. */
export async function loadModule(path: string): Promise<LoadedModule> {
  let exports: Record<string, unknown>;
  try {
    exports = await import(pathToFileURL(resolve(path)).href);
  } catch (error) {
    throw new ConfigError(`cannot load module '${path}': ${loadFailure(error as NodeJS.ErrnoException)}`);
  }
  const definitions = new Set<Agent | Workflow>();
  for (const value of Object.values(exports)) {
    for (const item of Array.isArray(value) ? value : [value]) if (isDefinition(item)) definitions.add(item);
  }
  if (definitions.size === 0) throw new ConfigError(`module '${path}' exports no Agent or Workflow`);
  return { definitions: [...definitions], provider: isProvider(exports.provider) ? exports.provider : undefined };
}
