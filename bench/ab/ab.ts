// A/B throughput comparison of two worker setups, for changes too small for `npm run bench` to
// show: the arms alternate trial by trial (the order flips every trial) after warm-up trials, each
// with its own worker processes, client process and prefix. Prints each arm's median jobs/s, CPU
// per run and Redis commands per run, and the medians of the paired B/A ratios (jobs/s, CPU, Redis CPU).
//
//   npx tsx bench/ab/ab.ts --a <arm> --b <arm> [--workers N] [--trials N] [--warmup N]
//
// An arm is `<root>[::<node flags>[::<NAME=value …>]]`: a tree (`.`, or a `git worktree` of
// another commit with its own `npm ci`), optional Node flags for its worker processes (without
// them a worker starts as `npx arcflow worker` would, through that tree's `arcflow` shebang), and
// optional environment for them (`AB_WORKER_ARGS` adds `arcflow worker` arguments).
// Example: --a ../wt-before --b . --trials 20
import { type ChildProcess, fork } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { type CpuSplit, REDIS_URL, cpuPer, cpuTotal, percentile } from '../lib.ts';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    a: { type: 'string', default: '.' },
    b: { type: 'string', default: '.' },
    workers: { type: 'string', default: '1' },
    trials: { type: 'string', default: '16' },
    warmup: { type: 'string', default: '2' },
  },
});
const TRIALS = Number(values.trials);
const WARMUP = Number(values.warmup);
/** Runs per trial, as engineTrial in ../throughput.ts enqueues them. */
const RUNS = 300;

interface Arm {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pids: number[];
  readonly rates: number[];
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

async function startArm(name: string, spec: string): Promise<Arm> {
  const [root = '.', flags = '', env = ''] = spec.split('::');
  const child = fork(resolve(here, 'driver.ts'), [], {
    execArgv: ['--import', import.meta.resolve('tsx/esm')],
    env: { ...process.env, AB_ROOT: resolve(root), AB_PREFIX: `ab-${name}-${process.pid}`, AB_WORKERS: values.workers, AB_NODE_FLAGS: flags, ...parseEnv(env) },
  });
  const ready = await nextMessage(child);
  return { name, child, pids: [child.pid!, ...(ready.pids as number[])], rates: [], cpu: [], commands: [] };
}

const redis = new Redis(REDIS_URL);
const arms = [await startArm('A', values.a!), await startArm('B', values.b!)] as const;
for (let trial = 0; trial < WARMUP + TRIALS; trial += 1) {
  for (const arm of trial % 2 === 0 ? arms : [...arms].reverse()) {
    // The driver process is the client: its CPU is counted with the workers'.
    const measured = await cpuPer(redis, arm.pids, RUNS, async () => {
      arm.child.send({ trial });
      return (await nextMessage(arm.child)).rate as number;
    });
    if (trial < WARMUP) continue;
    arm.rates.push(measured.result);
    arm.cpu.push(measured.cpu);
    arm.commands.push(measured.commands.all);
  }
}

const median = (list: readonly number[]) => percentile(list, 50);
for (const arm of arms) {
  const redisMs = median(arm.cpu.map((cpu) => cpu.redis));
  const workersMs = median(arm.cpu.map((cpu) => cpu.workers));
  console.log(
    `${arm.name}: ${median(arm.rates).toFixed(0)} jobs/s [${arm.rates.map((rate) => rate.toFixed(0)).join(' ')}]  ` +
      `CPU per run: Redis ${redisMs.toFixed(2)} + workers and client ${workersMs.toFixed(2)} ms  Redis commands per run ${median(arm.commands).toFixed(0)}`,
  );
}
const [a, b] = arms;
const paired = a.rates.map((rate, trial) => b.rates[trial]! / rate);
const cpuPaired = a.cpu.map((cpu, trial) => cpuTotal(b.cpu[trial]!) / cpuTotal(cpu));
const redisPaired = a.cpu.map((cpu, trial) => b.cpu[trial]!.redis / cpu.redis);
const percent = (ratio: number) => `${((ratio - 1) * 100).toFixed(1)}%`;
console.log(`B/A jobs/s: median ${percent(median(paired))}  [${paired.map((ratio) => ((ratio - 1) * 100).toFixed(0)).join(' ')}]`);
console.log(`B/A CPU per run: median ${percent(median(cpuPaired))}`);
console.log(`B/A Redis CPU per run: median ${percent(median(redisPaired))}  [${redisPaired.map((ratio) => ((ratio - 1) * 100).toFixed(0)).join(' ')}]`);
for (const arm of arms) {
  arm.child.send({ stop: true });
  await nextMessage(arm.child);
}
await redis.quit();
