import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REDIS_URL } from './lib.ts';

const here = dirname(fileURLToPath(import.meta.url));
// tsx's loader in the worker's own process (its CLI would run the file in a child process, and
// the CPU measurement would read the wrong pid).
const TSX_LOADER = import.meta.resolve('tsx/esm');
export const BENCH_AGENTS = resolve(here, 'agents.ts');

/** A raw BullMQ worker process (the baseline), ready when it says so. */
export function spawnRawWorker(prefix: string, concurrency: number): Promise<ChildProcess> {
  return spawnBenchProcess('raw-worker.ts', [prefix, String(concurrency)]);
}

/** A worker process of the design's floor (see floor-worker.ts). */
export function spawnFloorWorker(prefix: string, fan: number): Promise<ChildProcess> {
  return spawnBenchProcess('floor-worker.ts', [prefix, String(fan)]);
}

async function spawnBenchProcess(file: string, args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, resolve(here, file), ...args], {
    env: { ...process.env, REDIS_URL },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((ready) => child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && ready()));
  return child;
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await exited;
}
