import { shortHash } from '../canonical.ts';
import type { ToolDefinition } from '../tools/define.ts';
import { childOf } from './agent-tool.ts';

const hashes = new WeakMap<ToolDefinition, string>();

/**
 * A tool's definition hash: two tools are the same tool only if theirs are equal. It covers what a
 * call is planned with, the name, description and input schema the model was shown and its
 * arguments were checked against (and, for an agent tool, the agent it starts); a handler's code
 * and the operational options (timeout, retries, concurrency) may change in a rolling deploy
 * without stranding calls planned before it. First 16 hex characters, like `input_schema_hash`.
 */
export function toolDefinitionHash(tool: ToolDefinition): string {
  let hash = hashes.get(tool);
  if (hash === undefined) {
    hash = shortHash({ name: tool.name, description: tool.description, input_schema_hash: tool.input_schema_hash, child: childOf(tool)?.agent.name ?? null });
    hashes.set(tool, hash);
  }
  return hash;
}
