import { inspect } from 'node:util';
import type { ToolLogger } from './tools/define.ts';

/** A logger writing JSON lines to stderr: the worker's log, where real handler errors go. */
export function stderrLogger(component: string): ToolLogger {
  const write = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    process.stderr.write(`${logLine({ time: new Date().toISOString(), level, component, message, ...loggable(fields) })}\n`);
  };
  return { info: write('info'), warn: write('warn'), error: write('error') };
}

/** A logger that drops everything. */
export const silentLogger: ToolLogger = { info() {}, warn() {}, error() {} };

/**
 * Fields as they can be logged: an `Error` as its name, message, stack (and code), and anything a
 * handler may throw that JSON cannot hold (a BigInt, a circular object) as its inspected text.
 */
export function loggable(fields: Record<string, unknown> = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) out[key] = value instanceof Error ? describeError(value) : value;
  return out;
}

/** An error for a log line: never its own properties beyond these, which may hold anything. */
export function describeError(error: Error): Record<string, unknown> {
  const code = (error as { code?: unknown }).code;
  return { name: error.name, message: error.message, stack: error.stack, ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}) };
}

/** One JSON line, whatever the values: BigInts as text, and a value JSON cannot hold as its inspected text. */
export function logLine(record: Record<string, unknown>): string {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(record)) {
    try {
      JSON.stringify(value, bigintAsText);
      out[key] = value;
    } catch {
      out[key] = inspect(value, { depth: 3, breakLength: Number.POSITIVE_INFINITY });
    }
  }
  return JSON.stringify(out, bigintAsText);
}

function bigintAsText(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? `${value}n` : value;
}

/** A logger that adds `fields` (a call's run, step and call ids) to every line, under the line's own. */
export function withFields(logger: ToolLogger, fields: Record<string, unknown>): ToolLogger {
  return {
    info: (message, own) => logger.info(message, { ...fields, ...own }),
    warn: (message, own) => logger.warn(message, { ...fields, ...own }),
    error: (message, own) => logger.error(message, { ...fields, ...own }),
  };
}
