import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { loadSchemaValidator } from '@arcflow/core';

/**
 * Set by whatever registered a TypeScript loader for the whole process already: the `arcflow`
 * command does so when it runs from the repository's sources.
 */
export const TYPESCRIPT_LOADER_REGISTERED = Symbol.for('arcflow.typescript-loader');

let registering: Promise<void> | undefined;

/**
 * Registers tsx for what is imported from now on, once per process. Called just before a user's
 * `.ts` module is imported, never up front: arcflow's own code is compiled JavaScript and is
 * already loaded, so only the user's files pass through the loader. tsx rather than Node's own
 * type stripping: it starts faster (Node's stripper loads a WebAssembly compiler on first use),
 * and it keeps what users' TypeScript relies on — `enum`s, `paths` in tsconfig, and `./x.js`
 * naming `./x.ts` — on every supported Node line.
 */
export function useTypeScriptLoader(modulePath: string): Promise<void> {
  if ((globalThis as Record<symbol, unknown>)[TYPESCRIPT_LOADER_REGISTERED]) return Promise.resolve();
  registering ??= preloadArcflow(modulePath)
    .then(() => {
      // ajv too (about 90 CommonJS modules), which the module's first tool() would load through the loader.
      loadSchemaValidator();
      return import('tsx/esm/api');
    })
    .then(({ register }) => {
      register();
      (globalThis as Record<symbol, unknown>)[TYPESCRIPT_LOADER_REGISTERED] = true;
    });
  return registering;
}

/**
 * Loads the `arcflow` package the user's module will import, as it resolves from the module's
 * folder, before tsx is registered: a module already loaded is not loaded again through tsx's
 * loader (each import through it is a round trip to the loader's thread). A module that does not
 * see the package loses nothing.
 */
async function preloadArcflow(modulePath: string): Promise<void> {
  let entry: string;
  try {
    entry = createRequire(modulePath).resolve('arcflow');
  } catch {
    return;
  }
  await import(pathToFileURL(entry).href);
}
