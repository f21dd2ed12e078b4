import { cleanupPrefix, defineHostileOutputScenarios, defineLoopScenarios, testPrefix } from '@arcflow/testing';
import { afterAll } from 'vitest';
import { engineRunner } from './harness.ts';

const prefixes: string[] = [];
const nextPrefix = () => {
  const prefix = testPrefix('scenarios');
  prefixes.push(prefix);
  return prefix;
};
afterAll(async () => {
  for (const prefix of prefixes) await cleanupPrefix(prefix);
});

defineLoopScenarios('queue engine', engineRunner(nextPrefix));
defineHostileOutputScenarios('queue engine', engineRunner(nextPrefix));
