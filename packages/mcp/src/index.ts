/** MCP servers' tools as arcflow tools (SPEC §13); the SDK is loaded when a server is first connected. */
export { mcpTools, McpToolError } from './source.ts';
export type { McpToolsConfig, McpTransport } from './config.ts';
export { arcflowToolName } from './names.ts';
