import { metricsPort, runWorkerProcess } from '@arcflow/worker';
import { ConfigError } from '@arcflow/core';
import type { WorkerRole } from '@arcflow/queue';

const list = (value: string | undefined) =>
  value
    ?.split(',')
    .map((item) => item.trim())
    .filter(Boolean);

/** `arcflow worker`: runs until SIGTERM/SIGINT (returns -1: do not exit). */
export async function workerCommand(flags: { module?: string; roles?: string; tools?: string; concurrency?: string; 'metrics-port'?: string }): Promise<number> {
  if (!flags.module) throw new ConfigError('worker needs --module <file.ts|file.js>');
  const concurrency = flags.concurrency === undefined ? undefined : Number(flags.concurrency);
  if (concurrency !== undefined && (!Number.isInteger(concurrency) || concurrency < 1)) {
    throw new ConfigError(`--concurrency must be an integer >= 1, got ${flags.concurrency}`);
  }
  const port = metricsPort('--metrics-port', flags['metrics-port']);
  await runWorkerProcess({
    module: flags.module,
    roles: list(flags.roles) as WorkerRole[] | undefined,
    tools: list(flags.tools),
    concurrency,
    ...(port !== undefined ? { metricsPort: port } : {}),
  });
  return -1;
}
