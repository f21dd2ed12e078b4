import type { ToolLogger } from './tools/define.ts';

/** A logger writing JSON lines to stderr: the worker's log, where real handler errors go. */
export function stderrLogger(component: string): ToolLogger {
  const write = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    process.stderr.write(`${JSON.stringify({ level, component, message, ...serialisable(fields) })}\n`);
  };
  return { info: write('info'), warn: write('warn'), error: write('error') };
}

/** A logger that drops everything. */
export const silentLogger: ToolLogger = { info() {}, warn() {}, error() {} };

function serialisable(fields: Record<string, unknown> = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    out[key] = value instanceof Error ? { name: value.name, message: value.message, stack: value.stack } : value;
  }
  return out;
}
