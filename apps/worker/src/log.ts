import { type ToolLogger, describeError } from '@arcflow/core';
import { pino } from 'pino';

/**
 * The worker's log: JSON lines on stderr through pino, each with `time` (ISO), `level`,
 * `worker_id` and `pid`, then the line's own fields (run, step and call ids where there are
 * some). An `error` field that is an Error is logged as its name, message, stack and code;
 * BigInts and circular values are written as text, never thrown.
 */
export function workerLogger(worker_id: string): ToolLogger {
  const log = pino(
    {
      base: { worker_id, pid: process.pid },
      messageKey: 'message',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pino.destination({ fd: 2, sync: true }),
  );
  const write =
    (level: 'info' | 'warn' | 'error') =>
    (message: string, fields: Record<string, unknown> = {}) => {
      const error = fields.error;
      log[level](error instanceof Error ? { ...fields, error: describeError(error) } : fields, message);
    };
  return { info: write('info'), warn: write('warn'), error: write('error') };
}
