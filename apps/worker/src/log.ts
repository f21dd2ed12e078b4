import { createRequire } from 'node:module';
import { type ToolLogger, describeError } from '@arcflow/core';
import type { Logger } from 'pino';

// pino is loaded at the first line, not when the worker starts: a worker that has nothing to say
// before its ready line does not pay for it then. pino is CommonJS, so the require is synchronous.
const load = createRequire(import.meta.url);

/**
 * The worker's log: JSON lines on stderr through pino, each with `time` (ISO), `level`,
 * `worker_id` and `pid`, then the line's own fields (run, step and call ids where there are
 * some). An `error` field that is an Error is logged as its name, message, stack and code;
 * BigInts and circular values are written as text, never thrown.
 */
export function workerLogger(worker_id: string): ToolLogger {
  let log: Logger | undefined;
  const open = (): Logger => {
    const { pino } = load('pino') as typeof import('pino');
    return pino(
      {
        base: { worker_id, pid: process.pid },
        messageKey: 'message',
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
      },
      pino.destination({ fd: 2, sync: true }),
    );
  };
  const write =
    (level: 'info' | 'warn' | 'error') =>
    (message: string, fields: Record<string, unknown> = {}) => {
      const error = fields.error;
      log ??= open();
      log[level](error instanceof Error ? { ...fields, error: describeError(error) } : fields, message);
    };
  return { info: write('info'), warn: write('warn'), error: write('error') };
}
