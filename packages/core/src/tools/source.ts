import type { ToolDefinition, ToolLogger } from './define.ts';

/**
 * Tools that exist only once something outside is asked (an MCP server's `tools/list`): an entry
 * of an agent's `tools` beside `tool()` entries, opened when a worker starts or `runLocal` begins
 * (see `openToolSources`), never when the agent is constructed.
 */
export interface ToolSource {
  readonly kind: 'tool_source';
  /** Who the tools come from, for messages: `MCP server 'everything'`. */
  readonly label: string;
  /** What the definition hash of an agent that is not yet opened sees of the source (JSON). */
  readonly identity: unknown;
  /** Lists the tools; a source that cannot answer throws a one-line `ConfigError` naming itself. */
  open(session: ToolSourceSession): Promise<readonly ToolDefinition[]>;
}

/** A resource a session keeps for its sources (a connection), closed with the session. */
export interface SessionResource {
  close(): Promise<void>;
}

/** What a source is given when it is opened: one per worker (or per local run). */
export interface ToolSourceSession {
  readonly logger: ToolLogger;
  /** The resource under `key`, made by `make` on the first ask: sources of one server share one connection. */
  resource<T extends SessionResource>(key: string, make: () => T): T;
}

/** Whether a `tools` entry is a {@link ToolSource}. */
export function isToolSource(value: unknown): value is ToolSource {
  return value !== null && typeof value === 'object' && (value as { kind?: unknown }).kind === 'tool_source';
}
