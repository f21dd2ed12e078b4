import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WORKER_NODE_FLAGS } from './heap.ts';

/** The `arcflow` command of this repository. */
export const ARCFLOW_BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../cli/bin/arcflow.js');

export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** The worker's id, from its ready line. */
  readonly id: string;
  /** Everything it wrote to stderr so far (its log). */
  readonly stderr: () => string;
  /** Resolves with the exit code (or signal) when the process ends. */
  readonly exited: Promise<number | string>;
  /** SIGTERM, then wait for the exit. */
  stop(): Promise<number | string>;
  kill(signal?: NodeJS.Signals): void;
}

/**
 * Starts `arcflow worker` as a real child process, with the worker's Node flags, and resolves
 * once it is ready (it printed its ready line). It drains and exits if this process ends without
 * stopping it. `args` are extra CLI flags; `env` is merged over this process's environment.
 */
export async function spawnWorker(module: string, options: { args?: string[]; env?: Record<string, string>; readyTimeoutMs?: number } = {}): Promise<WorkerProcess> {
  const child = spawn(process.execPath, [...WORKER_NODE_FLAGS, ARCFLOW_BIN, 'worker', '--module', module, ...(options.args ?? [])], {
    env: { ...process.env, ...options.env },
    // The IPC channel carries nothing: it closes when this process ends, however it ends, and the worker then drains and exits.
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  child.channel?.unref();
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | string>((resolveExit) => child.on('exit', (code, signal) => resolveExit(code ?? signal ?? -1)));
  const id = await new Promise<string>((resolveReady, reject) => {
    let stdout = '';
    const timer = setTimeout(() => reject(new Error(`worker not ready in time; stderr:\n${stderr}`)), options.readyTimeoutMs ?? 30_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /arcflow worker (\S+) ready/.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolveReady(match[1]!);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited (${code}) before it was ready; stderr:\n${stderr}`));
    });
  });
  return {
    child,
    pid: child.pid!,
    id,
    stderr: () => stderr,
    exited,
    kill: (signal = 'SIGKILL') => void child.kill(signal),
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}
