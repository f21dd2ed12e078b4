import type { ToolLogger } from '@arcflow/core';

/** A logger that keeps what it is told, to show handler errors reach the worker's log only. */
export function capturingLogger(): ToolLogger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (message: string, fields?: Record<string, unknown>) => {
    lines.push(`${message} ${JSON.stringify(fields, (_key, value) => (value instanceof Error ? value.message : value))}`);
  };
  return { lines, info: keep, warn: keep, error: keep };
}
