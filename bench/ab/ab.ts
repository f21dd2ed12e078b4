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
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { REDIS_URL, cpuTotal } from '../lib.ts';
import { median, pairedRatio, runPairedTrials, startArm, stopArms } from './arms.ts';

const { values } = parseArgs({
  options: {
    a: { type: 'string', default: '.' },
    b: { type: 'string', default: '.' },
    workers: { type: 'string', default: '1' },
    trials: { type: 'string', default: '16' },
    warmup: { type: 'string', default: '2' },
  },
});

const redis = new Redis(REDIS_URL);
const workers = Number(values.workers);
const arms = [await startArm('A', values.a!, workers), await startArm('B', values.b!, workers)] as const;
await runPairedTrials(redis, arms, { trials: Number(values.trials), warmup: Number(values.warmup) });

for (const arm of arms) {
  const redisMs = median(arm.cpu.map((cpu) => cpu.redis));
  const workersMs = median(arm.cpu.map((cpu) => cpu.workers + cpu.client));
  console.log(
    `${arm.name}: ${median(arm.rates).toFixed(0)} jobs/s [${arm.rates.map((rate) => rate.toFixed(0)).join(' ')}]  ` +
      `CPU per run: Redis ${redisMs.toFixed(2)} + workers and client ${workersMs.toFixed(2)} ms  Redis commands per run ${median(arm.commands).toFixed(0)}`,
  );
}
const [a, b] = arms;
const percent = (ratio: number) => `${((ratio - 1) * 100).toFixed(1)}%`;
const trialPercents = (measure: (arm: typeof a, trial: number) => number) => a.rates.map((_, trial) => ((measure(b, trial) / measure(a, trial) - 1) * 100).toFixed(0)).join(' ');
const rate = (arm: typeof a, trial: number) => arm.rates[trial]!;
const redisCpu = (arm: typeof a, trial: number) => arm.cpu[trial]!.redis;
console.log(`B/A jobs/s: median ${percent(pairedRatio(a, b, rate))}  [${trialPercents(rate)}]`);
console.log(`B/A CPU per run: median ${percent(pairedRatio(a, b, (arm, trial) => cpuTotal(arm.cpu[trial]!)))}`);
console.log(`B/A Redis CPU per run: median ${percent(pairedRatio(a, b, redisCpu))}  [${trialPercents(redisCpu)}]`);
await stopArms(arms);
await redis.quit();
