/** The shared scenario suites (they define vitest tests): run against every runner. */
export { defineLoopScenarios, type ScenarioRunner } from './scenarios.ts';
export { defineHostileOutputScenarios } from './hostile-scenarios.ts';
export { defineWorkflowScenarios } from './workflow-scenarios.ts';
export { defineBudgetScenarios } from './budget-scenarios.ts';
export { defineOutputScenarios } from './output-scenarios.ts';
export { defineStateScenarios } from './state-scenarios.ts';
export { defineToolResultScenarios, type WaitingScenarioRunner } from './tool-result-scenarios.ts';
