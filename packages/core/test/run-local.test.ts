import { runLocal } from '@arcflow/core';
import {
  type ScenarioRunner,
  defineHostileOutputScenarios,
  defineBudgetScenarios,
  defineLoopScenarios,
  defineOutputScenarios,
  defineStateScenarios,
  defineWorkflowScenarios,
} from '@arcflow/testing/scenarios';

const local: ScenarioRunner = (agent, input, options) => runLocal(agent, input, { ...options, exec_config: options.exec_config as never, logger: options.logger ?? false });

defineLoopScenarios('runLocal', local);
defineHostileOutputScenarios('runLocal', local);
defineWorkflowScenarios('runLocal', local);
defineBudgetScenarios('runLocal', local);
defineOutputScenarios('runLocal', local);
defineStateScenarios('runLocal', local);
