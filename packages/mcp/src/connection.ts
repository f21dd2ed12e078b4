import { setTimeout as sleep } from 'node:timers/promises';
import { canonicalJson, type SessionResource, type ToolLogger } from '@arcflow/core';
import type { McpTransport } from './config.ts';
import { type McpClient, loadClient, makeTransport } from './sdk.ts';

/** How long connecting (starting the server and its `initialize`) may take. */
const CONNECT_TIMEOUT_MS = 15_000;
/** How long one `tools/list` page may take. */
const LIST_TIMEOUT_MS = 15_000;
/** The most pages of `tools/list` read (a server that never stops paging is refused). */
const MAX_LIST_PAGES = 50;
/** How long a server process that is being stopped gets before SIGKILL. */
const STOP_GRACE_MS = 2_000;
/** The SDK's error code for a connection that closed under a request. */
const CONNECTION_CLOSED = -32000;
/** The longest stderr line kept for a message or a log line. */
const MAX_LINE = 300;

/** A tool as the server lists it (untrusted: each field is checked before use). */
export interface ListedTool {
  readonly name: unknown;
  readonly description?: unknown;
  readonly inputSchema?: unknown;
}

/** A `tools/call` result as the server sent it. */
export type CallResult = Record<string, unknown>;

/**
 * One worker's client of one MCP server, shared by every tool and agent that uses the server.
 * Connected on first use; when the connection drops (the server exited, the HTTP session ended),
 * the calls in flight fail and the next call connects again.
 */
export class McpConnection implements SessionResource {
  readonly #server: string;
  readonly #transport: McpTransport;
  readonly #logger: ToolLogger;
  #client: Promise<McpClient> | undefined;
  #closed = false;
  /** The last line the server wrote on stderr, for a message when it cannot be reached. */
  #lastStderr = '';
  /** What the server wrote on stderr after its last newline. */
  #stderrRest = '';

  constructor(server: string, transport: McpTransport, logger: ToolLogger) {
    this.#server = server;
    this.#transport = transport;
    this.#logger = logger;
  }

  /** Whether `transport` is the one this connection was made for (one server name, one transport). */
  serves(transport: McpTransport): boolean {
    return canonicalJson(transport) === canonicalJson(this.#transport);
  }

  /** The last line the server wrote on stderr (stdio), if any. */
  get lastStderr(): string {
    return this.#stderrRest.trim() || this.#lastStderr;
  }

  /** Every tool the server lists, following `nextCursor`. */
  async listTools(): Promise<ListedTool[]> {
    const client = await this.#connected();
    const tools: ListedTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page += 1) {
      const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: LIST_TIMEOUT_MS });
      tools.push(...(result.tools as ListedTool[]));
      cursor = typeof result.nextCursor === 'string' ? result.nextCursor : undefined;
      if (cursor === undefined) return tools;
    }
    throw new Error(`tools/list went on for more than ${MAX_LIST_PAGES} pages`);
  }

  /** Calls a tool; `signal` aborts the request (the SDK tells the server it is cancelled). */
  async callTool(name: string, args: unknown, signal: AbortSignal, timeoutMs: number): Promise<CallResult> {
    const connecting = this.#connected();
    const client = await connecting;
    signal.throwIfAborted();
    try {
      return (await client.callTool({ name, arguments: args as Record<string, unknown> }, undefined, { signal, timeout: timeoutMs })) as CallResult;
    } catch (error) {
      // The way to the server broke (an HTTP session the server no longer knows, a closed pipe): the
      // next call connects again. A protocol error the server sent, a timeout or an abort keep it.
      if (!signal.aborted && lostConnection(error) && this.#client === connecting) {
        this.#client = undefined;
        this.#logger.warn('MCP server connection lost; the next call connects again', { mcp_server: this.#server });
        void client.close().catch(() => undefined);
      }
      throw error;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const client = await this.#client?.catch(() => undefined);
    this.#client = undefined;
    await client?.close().catch(() => undefined);
  }

  #connected(): Promise<McpClient> {
    if (this.#closed) return Promise.reject(new Error(`the client of MCP server '${this.#server}' is closed`));
    if (!this.#client) {
      const connecting = this.#connect();
      this.#client = connecting;
      // A failed connect is forgotten, so the next call tries again.
      connecting.catch(() => {
        if (this.#client === connecting) this.#client = undefined;
      });
    }
    return this.#client;
  }

  async #connect(): Promise<McpClient> {
    const Client = await loadClient();
    const made = await makeTransport(this.#transport);
    made.stderr?.on('data', (chunk: Buffer) => this.#onStderr(chunk));
    const client = new Client({ name: 'arcflow', version: '0.2.0' });
    const current = this.#client;
    let connected = false;
    client.onclose = () => {
      // Dropped: the next call connects again (a close of ours has already forgotten the client).
      if (this.#client === current) this.#client = undefined;
      if (connected && !this.#closed) this.#logger.warn('MCP server connection closed', { mcp_server: this.#server });
    };
    const connecting = client.connect(made.transport, { timeout: CONNECT_TIMEOUT_MS });
    // The SDK spawns a stdio server synchronously within connect(), and forgets its pid when closing.
    const pid = made.pid();
    try {
      await connecting;
    } catch (error) {
      // The SDK starts closing a failed connection without waiting for the server to exit; a
      // worker that refuses to start exits at once, so the server is stopped here first.
      await client.close().catch(() => undefined);
      await stopProcess(pid);
      throw error;
    }
    if (this.#closed) {
      await client.close().catch(() => undefined);
      throw new Error(`the client of MCP server '${this.#server}' is closed`);
    }
    connected = true;
    this.#logger.info('MCP server connected', { mcp_server: this.#server, transport: this.#transport.type, ...(pid ? { server_pid: pid } : {}) });
    return client;
  }

  #onStderr(chunk: Buffer): void {
    const lines = (this.#stderrRest + chunk.toString('utf8')).split('\n');
    // The last piece may be a line the next chunk ends; a line without an end is kept cut.
    this.#stderrRest = (lines.pop() ?? '').slice(0, MAX_LINE);
    for (const raw of lines) {
      const line = raw.trim().slice(0, MAX_LINE);
      if (line === '') continue;
      this.#lastStderr = line;
      this.#logger.info('MCP server stderr', { mcp_server: this.#server, line });
    }
  }
}

/** An error that says the connection, not the call, failed: anything but an MCP error the server answered with. */
function lostConnection(error: unknown): boolean {
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
  return name !== 'McpError' || code === CONNECTION_CLOSED;
}

/** Ends a server process arcflow started, if it still runs: SIGTERM, then SIGKILL after 2 s. */
async function stopProcess(pid: number | undefined): Promise<void> {
  if (pid === undefined || !signal(pid, 'SIGTERM')) return;
  for (let waited = 0; waited < STOP_GRACE_MS; waited += 50) {
    await sleep(50);
    if (!signal(pid, 0)) return;
  }
  signal(pid, 'SIGKILL');
}

/** Sends a signal; false when there is no such process (any more). */
function signal(pid: number, which: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, which);
    return true;
  } catch {
    return false;
  }
}

/**
 * An error's message, then its causes' (and an aggregate's first error's), each once, at most four,
 * joined by `: ` — `fetch failed` alone names no reason; its cause (`connect ECONNREFUSED …`) does.
 */
export function failureText(error: unknown): string {
  const messages: string[] = [];
  let current: unknown = error;
  while (current !== undefined && current !== null && messages.length < 4) {
    const failure = current as { message?: unknown; code?: unknown; cause?: unknown; errors?: unknown };
    const message = current instanceof Error ? String(failure.message || failure.code || current.name) : String(current);
    if (!messages.some((earlier) => earlier.includes(message))) messages.push(message);
    current = failure.cause ?? (Array.isArray(failure.errors) ? failure.errors[0] : undefined);
  }
  return messages.join(': ');
}
