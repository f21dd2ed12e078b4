import {
  ConfigError,
  type KnownKeys,
  NamePattern,
  type ResolvedToolOptions,
  TOOL_OPTION_KEYS,
  type ToolOptions,
  checkKnownKeys,
  isPlainObject,
  resolveToolOptions,
} from '@arcflow/core';

/** How to reach an MCP server: a command arcflow starts (stdio), or a streamable HTTP endpoint. */
export type McpTransport =
  | {
      type: 'stdio';
      command: string;
      args?: readonly string[];
      /** Added to the few variables the SDK passes on by default (PATH, HOME, …); nothing else of the worker's environment is passed. */
      env?: Readonly<Record<string, string>>;
      cwd?: string;
    }
  | { type: 'http'; url: string; headers?: Readonly<Record<string, string>> };

/** `mcpTools(…)`: an MCP server's tools as arcflow tools (SPEC §13). The tool options apply to every tool. */
export interface McpToolsConfig extends ToolOptions {
  /** The server's name: in messages, and the default prefix `<server>_`. */
  server: string;
  transport: McpTransport;
  /** Only these of the server's tools (by the server's names). */
  include?: readonly string[];
  /** None of these (by the server's names). */
  exclude?: readonly string[];
  /** Put before each tool's name (default `<server>_`; `''` for none). */
  prefix?: string;
  /** Options of single tools, by the server's names; they win over the options for all, key by key. */
  tools?: Readonly<Record<string, ToolOptions>>;
}

const CONFIG_KEYS = { ...TOOL_OPTION_KEYS, server: true, transport: true, include: true, exclude: true, prefix: true, tools: true } as const satisfies KnownKeys<McpToolsConfig>;
const STDIO_KEYS = { type: true, command: true, args: true, env: true, cwd: true } as const;
const HTTP_KEYS = { type: true, url: true, headers: true } as const;

/** A prefix keeps a tool's name within arcflow's rules and leaves room for the server's name. */
const MAX_PREFIX_LENGTH = 32;
const PREFIX = new RegExp(`^[A-Za-z0-9_-]{0,${MAX_PREFIX_LENGTH}}$`);

/** A config as checked: what the source keeps. */
export interface CheckedConfig {
  readonly server: string;
  readonly transport: McpTransport;
  readonly include: readonly string[] | undefined;
  readonly exclude: readonly string[];
  readonly prefix: string;
  readonly shared: ToolOptions;
  /** Per-tool options merged over the shared ones, each checked. */
  readonly perTool: ReadonlyMap<string, ResolvedToolOptions>;
  /** The options of a tool `tools` does not name. */
  readonly defaults: ResolvedToolOptions;
}

/** Checks an `mcpTools` config when the module is loaded, so a typo fails before any server starts. */
export function checkMcpConfig(config: McpToolsConfig): CheckedConfig {
  const server = config?.server;
  if (typeof server !== 'string' || !NamePattern.tool.test(server)) {
    throw new ConfigError(`mcpTools: server must be a name matching ${NamePattern.tool}, got ${JSON.stringify(server)}`);
  }
  const where = `mcpTools '${server}'`;
  checkKnownKeys(config, CONFIG_KEYS, where, 'definition');
  const transport = checkTransport(where, config.transport);
  const prefix = config.prefix ?? `${server}_`;
  if (config.prefix === undefined && !PREFIX.test(prefix)) {
    throw new ConfigError(`${where}: the default prefix '${prefix}' is longer than ${MAX_PREFIX_LENGTH} characters; give a shorter prefix`);
  }
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) throw new ConfigError(`${where}: prefix must match ${PREFIX}, got ${JSON.stringify(prefix)}`);
  const include = config.include === undefined ? undefined : names(where, 'include', config.include);
  const exclude = config.exclude === undefined ? [] : names(where, 'exclude', config.exclude);
  const shared: ToolOptions = config;
  const defaults = resolveToolOptions(where, shared);
  const perTool = new Map<string, ResolvedToolOptions>();
  if (config.tools !== undefined) {
    if (!isPlainObject(config.tools)) throw new ConfigError(`${where}: tools must be an object of options by the server's tool names`);
    for (const [name, own] of Object.entries(config.tools)) {
      const at = `${where}: tools['${name}']`;
      if (!isPlainObject(own)) throw new ConfigError(`${at} must be an object of tool options`);
      checkKnownKeys(own, TOOL_OPTION_KEYS, at, 'definition');
      perTool.set(name, resolveToolOptions(at, mergeOptions(shared, own)));
    }
  }
  return Object.freeze({ server, transport, include, exclude, prefix, shared, perTool, defaults });
}

/** What a transport is, for messages: never its environment or headers (they may hold secrets). */
export function describeTransport(transport: McpTransport): string {
  return transport.type === 'stdio'
    ? `stdio: ${[transport.command, ...(transport.args ?? [])].join(' ')}`
    : `http: ${new URL(transport.url).origin}${new URL(transport.url).pathname}`;
}

function checkTransport(where: string, transport: unknown): McpTransport {
  if (!isPlainObject(transport)) throw new ConfigError(`${where}: transport must be { type: 'stdio', command, args?, env?, cwd? } or { type: 'http', url, headers? }`);
  if (transport.type === 'stdio') {
    checkKnownKeys(transport, STDIO_KEYS, `${where}: transport`, 'definition');
    if (typeof transport.command !== 'string' || transport.command === '') throw new ConfigError(`${where}: transport.command must be a non-empty string`);
    if (transport.args !== undefined) names(where, 'transport.args', transport.args, true);
    if (transport.env !== undefined) stringRecord(where, 'transport.env', transport.env);
    if (transport.cwd !== undefined && typeof transport.cwd !== 'string') throw new ConfigError(`${where}: transport.cwd must be a string`);
    return Object.freeze({ ...(transport as McpTransport) });
  }
  if (transport.type === 'http') {
    checkKnownKeys(transport, HTTP_KEYS, `${where}: transport`, 'definition');
    let url: URL | undefined;
    try {
      url = typeof transport.url === 'string' ? new URL(transport.url) : undefined;
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new ConfigError(`${where}: transport.url must be an http or https URL`);
    if (transport.headers !== undefined) stringRecord(where, 'transport.headers', transport.headers);
    return Object.freeze({ ...(transport as McpTransport) });
  }
  throw new ConfigError(`${where}: transport.type must be 'stdio' or 'http', got ${JSON.stringify(transport.type)}`);
}

function names(where: string, key: string, value: unknown, allowEmpty = false): readonly string[] {
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string' || (!allowEmpty && item === ''))) {
    throw new ConfigError(`${where}: ${key} must be a list of strings`);
  }
  return Object.freeze([...value]);
}

function stringRecord(where: string, key: string, value: unknown): void {
  if (!isPlainObject(value) || Object.values(value).some((item) => typeof item !== 'string')) throw new ConfigError(`${where}: ${key} must be an object of strings`);
}

/** A tool's own options over the shared ones, key by key, every key a `tool()` takes (an own key left `undefined` keeps the shared value). */
function mergeOptions(shared: ToolOptions, own: ToolOptions): ToolOptions {
  const merged: Record<string, unknown> = {};
  for (const key of Object.keys(TOOL_OPTION_KEYS) as (keyof ToolOptions)[]) merged[key] = own[key] ?? shared[key];
  return merged as ToolOptions;
}
