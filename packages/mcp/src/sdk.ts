import { ConfigError } from '@arcflow/core';
import type { Stream } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { MAX_MESSAGE_BYTES, cappedFetch } from './capped-fetch.ts';
import type { McpTransport } from './config.ts';

export type McpClient = import('@modelcontextprotocol/sdk/client/index.js').Client;

/** A transport made, with the child's stderr when the server is a command arcflow started. */
export interface MadeTransport {
  readonly transport: Transport;
  readonly stderr: Stream | undefined;
  /** The child's process id once started (stdio). */
  readonly pid: () => number | undefined;
}

/**
 * The SDK's client and the transport a server needs, loaded when a server is first connected:
 * importing `arcflow` never loads the SDK, and it is only needed by modules that use `mcpTools`.
 */
export async function loadClient(): Promise<typeof import('@modelcontextprotocol/sdk/client/index.js').Client> {
  return (await importSdk(() => import('@modelcontextprotocol/sdk/client/index.js'))).Client;
}

export async function makeTransport(transport: McpTransport): Promise<MadeTransport> {
  if (transport.type === 'http') {
    const { StreamableHTTPClientTransport } = await importSdk(() => import('@modelcontextprotocol/sdk/client/streamableHttp.js'));
    const made = new StreamableHTTPClientTransport(new URL(transport.url), {
      fetch: cappedFetch(),
      ...(transport.headers ? { requestInit: { headers: { ...transport.headers } } } : {}),
    });
    return { transport: made, stderr: undefined, pid: () => undefined };
  }
  const { StdioClientTransport } = await importSdk(() => import('@modelcontextprotocol/sdk/client/stdio.js'));
  const made = new StdioClientTransport({
    command: transport.command,
    args: [...(transport.args ?? [])],
    ...(transport.env ? { env: { ...transport.env } } : {}),
    ...(transport.cwd ? { cwd: transport.cwd } : {}),
    // Piped, not inherited: its lines go to the worker's log, tagged with the server's name.
    stderr: 'pipe',
    maxBufferSize: MAX_MESSAGE_BYTES,
  });
  return { transport: made, stderr: made.stderr ?? undefined, pid: () => made.pid ?? undefined };
}

async function importSdk<T>(load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && String((error as Error).message).includes('@modelcontextprotocol/sdk')) {
      throw new ConfigError('mcpTools needs the package @modelcontextprotocol/sdk (1.32 or later): npm install @modelcontextprotocol/sdk');
    }
    throw error;
  }
}
