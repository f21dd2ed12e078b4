#!/usr/bin/env -S node --max-semi-space-size=32
// The arcflow command. tsx is registered so a user's module may be .ts. In the repository the
// command runs from the TypeScript sources, with the repository's tsconfig mapping the @arcflow
// packages to their sources (docs/decisions/0001-run-from-source.md); installed, from dist/.
// The shebang's Node flags are the worker's (WORKER_NODE_FLAGS in apps/worker/src/heap.ts).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

const source = new URL('../src/main.ts', import.meta.url);
const repositoryConfig = fileURLToPath(new URL('../../../tsconfig.json', import.meta.url));
if (existsSync(source) && existsSync(repositoryConfig)) {
  register({ tsconfig: repositoryConfig });
  await import(source.href);
} else {
  register();
  await import('../dist/main.js');
}
