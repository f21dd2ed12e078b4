#!/usr/bin/env node
// Runs the TypeScript sources directly (no build step); see docs/decisions/0001-run-from-source.md.
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
