import type { ExecConfig, TestStep } from '@arcflow/core';

/**
 * A test-mode `exec_config` whose run asks, in one turn, each agent tool in `calls` (by tool name,
 * with its input and call id), then answers `done`; `agents` scripts the child runs by agent name.
 */
export function childrenInTestMode(
  calls: readonly { readonly tool: string; readonly input: string; readonly id: string }[],
  agents: Readonly<Record<string, TestStep>>,
): ExecConfig {
  return {
    test: {
      steps: { s1: { responses: [{ tool_calls: calls.map((call) => ({ name: call.tool, arguments: { input: call.input }, id: call.id })) }, { output: 'done' }] } },
      agents,
    },
  };
}
