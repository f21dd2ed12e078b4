import { createRequire } from 'node:module';
import type { McpTransport } from '@arcflow/mcp';

/** The entry of `@modelcontextprotocol/server-everything` (a third-party server, a devDependency). */
export const EVERYTHING_BIN = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

/** server-everything over stdio, started with this Node. */
export const everythingStdio: Extract<McpTransport, { type: 'stdio' }> = { type: 'stdio', command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] };
