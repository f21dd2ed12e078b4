import { runLocal } from '@arcflow/core';
import { defineLoopScenarios } from '@arcflow/testing';

defineLoopScenarios('runLocal', (agent, input, options) =>
  runLocal(agent, input, { ...options, exec_config: options.exec_config as never, logger: options.logger ?? false }),
);
