#!/usr/bin/env -S node --max-semi-space-size=32
// The arcflow command. Installed, it runs the compiled dist/ as it is: no TypeScript loader stands
// in front of arcflow's own code (a worker registers one for a user's .ts module only, when it
// loads it). In the repository the command runs from the TypeScript sources, through tsx with the
// repository's tsconfig mapping the @arcflow packages to their sources
// (docs/decisions/0001-run-from-source.md).
// The shebang's Node flags are the worker's (WORKER_NODE_FLAGS in apps/worker/src/heap.ts).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = new URL('../src/main.ts', import.meta.url);
const repositoryConfig = fileURLToPath(new URL('../../../tsconfig.json', import.meta.url));
if (existsSync(source) && existsSync(repositoryConfig)) {
  const { register } = await import('tsx/esm/api');
  register({ tsconfig: repositoryConfig });
  // The worker's loader for users' .ts modules (apps/worker/src/typescript-loader.ts) need not add another.
  globalThis[Symbol.for('arcflow.typescript-loader')] = true;
  await import(source.href);
} else {
  await import('../dist/main.js');
}
