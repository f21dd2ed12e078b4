// Paired arms for comparisons too small for one trial to show: each arm is a driver process
// (driver.ts: its own client and key prefix) with its own worker processes; trials alternate
// between the arms, the order flipping every trial, after warm-up trials. Used by ab.ts and by
// `npm run bench -- tracing`.
import { type ChildProcess, fork } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { type CpuSplit, cpuPer, percentile, processCpuSeconds } from '../lib.ts';

const here = dirname(fileURLToPath(import.meta.url));
/** Runs per trial, as engineTrial in ../throughput.ts enqueues them. */
export const RUNS_PER_TRIAL = 300;

export interface Arm {
  readonly name: string;
  readonly child: ChildProcess;
  readonly workerPids: readonly number[];
  readonly rates: number[];
  /** Per run: `workers` is the arm's worker processes, `client` its driver (the client). */
  readonly cpu: CpuSplit[];
  readonly commands: number[];
}

/** `NAME=value NAME2=value2` as an environment object. */
function parseEnv(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split(' ')
      .filter(Boolean)
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
}

function nextMessage(child: ChildProcess): Promise<Record<string, unknown>> {
  return new Promise((done) => child.once('message', (message) => done(message as Record<string, unknown>)));
}

/**
 * Starts an arm: `<root>[::<node flags>[::<NAME=value …>]]`, a tree (`.`, or a `git worktree` of
 * another commit with its own `npm ci`), optional Node flags for its worker processes, and
 * optional environment for them.
 */
export async function startArm(name: string, spec: string, workers: number): Promise<Arm> {
  const [root = '.', flags = '', env = ''] = spec.split('::');
  const child = fork(resolve(here, 'driver.ts'), [], {
    execArgv: ['--import', import.meta.resolve('tsx/esm')],
    env: { ...process.env, AB_ROOT: resolve(root), AB_PREFIX: `ab-${name}-${process.pid}`, AB_WORKERS: String(workers), AB_NODE_FLAGS: flags, ...parseEnv(env) },
  });
  const ready = await nextMessage(child);
  return { name, child, workerPids: ready.pids as number[], rates: [], cpu: [], commands: [] };
}

/** Runs `warmup + trials` trials of every arm, alternating their order, and keeps the counted ones. */
export async function runPairedTrials(redis: Redis, arms: readonly Arm[], options: { trials: number; warmup: number }): Promise<void> {
  for (let trial = 0; trial < options.warmup + options.trials; trial += 1) {
    for (const arm of trial % 2 === 0 ? arms : [...arms].reverse()) {
      const pid = arm.child.pid!;
      const clientBefore = processCpuSeconds(pid);
      const measured = await cpuPer(redis, arm.workerPids, RUNS_PER_TRIAL, async () => {
        arm.child.send({ trial });
        return (await nextMessage(arm.child)).rate as number;
      });
      if (trial < options.warmup) continue;
      // The bench process itself only waits: the client's CPU is the driver's.
      const client = ((processCpuSeconds(pid) - clientBefore) * 1000) / RUNS_PER_TRIAL;
      arm.rates.push(measured.result);
      arm.cpu.push({ ...measured.cpu, client });
      arm.commands.push(measured.commands.all);
    }
  }
}

export async function stopArms(arms: readonly Arm[]): Promise<void> {
  for (const arm of arms) {
    arm.child.send({ stop: true });
    await nextMessage(arm.child);
  }
}

export const median = (list: readonly number[]) => percentile(list, 50);

/** The median over trials of B's measure over A's in the same trial. */
export function pairedRatio(a: Arm, b: Arm, measure: (arm: Arm, trial: number) => number): number {
  return median(a.rates.map((_, trial) => measure(b, trial) / measure(a, trial)));
}
