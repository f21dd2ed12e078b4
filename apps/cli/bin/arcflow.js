#!/usr/bin/env -S node --max-semi-space-size=32
// Runs the TypeScript sources directly (no build step); see docs/decisions/0001-run-from-source.md.
// The shebang's Node flags are the worker's (WORKER_NODE_FLAGS in apps/worker/src/heap.ts).
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
