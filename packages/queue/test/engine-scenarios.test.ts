import { cleanupPrefix, testPrefix } from '@arcflow/testing';
import {
  defineBudgetScenarios,
  defineHostileOutputScenarios,
  defineLoopScenarios,
  defineOutputScenarios,
  defineStateScenarios,
  defineWorkflowScenarios,
} from '@arcflow/testing/scenarios';
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
defineWorkflowScenarios('queue engine', engineRunner(nextPrefix));
defineWorkflowScenarios('queue engine, two workers', engineRunner(nextPrefix, {}, 2));
defineBudgetScenarios('queue engine', engineRunner(nextPrefix));
defineOutputScenarios('queue engine', engineRunner(nextPrefix));
defineStateScenarios('queue engine', engineRunner(nextPrefix));
