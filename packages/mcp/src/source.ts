import { ConfigError, ToolAnswerError, type ToolContext, type ToolDefinition, type ToolSource, type ToolSourceSession, compileSchema, tool } from '@arcflow/core';
import { type CheckedConfig, type McpToolsConfig, checkMcpConfig, describeTransport } from './config.ts';
import { type ListedTool, McpConnection, failureText } from './connection.ts';
import { loadClient } from './sdk.ts';
import { selectTools } from './names.ts';
import { resultText } from './result.ts';

/** The longest description of a server's tool passed on to the model. */
const MAX_DESCRIPTION = 4096;

/**
 * A call the server answered with `isError: true`: the tool's answer, which the model reads as
 * `Error: <its text>`; the call fails `tool_error` at once, without retries.
 */
export class McpToolError extends ToolAnswerError {
  override readonly name: string = 'McpToolError';
}

/**
 * The tools of a Model Context Protocol server (SPEC §13), as an entry of an agent's `tools`:
 * listed once (`tools/list`) when a worker starts or `runLocal` begins, each then an ordinary tool
 * named `<prefix><tool name>` whose `input_schema` is the server's, taking every tool option.
 * The config is checked here; the server is not contacted until then.
 */
export function mcpTools(config: McpToolsConfig): ToolSource {
  const checked = checkMcpConfig(config);
  return Object.freeze({
    kind: 'tool_source' as const,
    label: `MCP server '${checked.server}'`,
    identity: {
      mcp: checked.server,
      transport: describeTransport(checked.transport),
      prefix: checked.prefix,
      include: checked.include ?? null,
      exclude: checked.exclude,
    },
    open: (session: ToolSourceSession) => openSource(checked, session),
  });
}

async function openSource(config: CheckedConfig, session: ToolSourceSession): Promise<ToolDefinition[]> {
  const { server } = config;
  const connection = session.resource(`mcp:${server}`, () => new McpConnection(server, config.transport, session.logger));
  if (!connection.serves(config.transport)) {
    throw new ConfigError(`MCP server '${server}' is given two different transports; use one mcpTools(…) value per server, or another server name`);
  }
  // The SDK is a package of its own: without it, say which to install (nothing was tried to reach).
  await loadClient();
  let listed: ListedTool[];
  try {
    listed = await connection.listTools();
  } catch (error) {
    const stderr = connection.lastStderr ? ` (its last stderr line: ${connection.lastStderr})` : '';
    throw new ConfigError(`MCP server '${server}' cannot be reached (${describeTransport(config.transport)}): ${oneLine(error)}${stderr}`);
  }
  const byServerName = new Map<string, ListedTool>();
  for (const entry of listed) if (typeof entry?.name === 'string' && !byServerName.has(entry.name)) byServerName.set(entry.name, entry);
  const selected = selectTools([...byServerName.keys()], { ...config, configured: [...config.perTool.keys()] });
  const tools: ToolDefinition[] = [];
  for (const { server_name, name } of selected) {
    const listedTool = byServerName.get(server_name) as ListedTool;
    // The options as resolved, less what only a resolved definition carries (its compiled output check).
    const { checkOutput: _compiled, ...options } = config.perTool.get(server_name) ?? config.defaults;
    const description = typeof listedTool.description === 'string' ? listedTool.description.slice(0, MAX_DESCRIPTION) : '';
    const schemaProblem = uncompilable(name, listedTool.inputSchema);
    if (schemaProblem) {
      // One tool the validator cannot enforce costs that tool, not the worker's start.
      session.logger.warn(`MCP tool '${server_name}' of server '${server}' is not served: its input schema cannot be compiled`, {
        mcp_server: server,
        tool: server_name,
        error: schemaProblem,
      });
      continue;
    }
    try {
      tools.push(
        tool({
          name,
          description,
          input_schema: listedTool.inputSchema as Record<string, unknown>,
          ...options,
          handler: async (args: unknown, ctx: ToolContext) => {
            const result = await connection.callTool(server_name, args, ctx.signal, options.timeout_ms);
            if (result.isError !== true) return resultText(result);
            // The tool's answer, not a failure to retry: the model reads it. What it said stays out of the log (untrusted).
            ctx.log.warn('MCP tool answered isError', { mcp_server: server });
            throw new McpToolError(resultText(result));
          },
        }),
      );
    } catch (error) {
      throw new ConfigError(`MCP server '${server}', tool '${server_name}': ${oneLine(error)}; exclude it with exclude: ['${server_name}']`);
    }
  }
  return tools;
}

/** Why the validator cannot enforce a listed tool's input schema, on one line; undefined when it can. */
function uncompilable(name: string, schema: unknown): string | undefined {
  try {
    compileSchema(`tool '${name}': input_schema`, schema);
    return undefined;
  } catch (error) {
    return oneLine(error);
  }
}

/**
 * An error's message on one line (a startup error is one line), cut to a readable length, with
 * its causes after it: `fetch failed` alone names no reason, its cause (`connect ECONNREFUSED …`) does.
 */
function oneLine(error: unknown): string {
  const text = failureText(error);
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 400 ? `${line.slice(0, 400)}…` : line;
}
