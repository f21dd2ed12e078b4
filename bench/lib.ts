import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Resident set size of a process, in MiB (Linux). */
export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return kib / 1024;
}

export async function redisUsedBytes(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

export interface Row {
  readonly measure: string;
  readonly arcflow: string;
  readonly baseline: string;
  readonly ratio: string;
  readonly target: string;
  readonly verdict: string;
}

export function printTable(rows: readonly Row[]): void {
  const header: Row = { measure: 'measure', arcflow: 'arcflow', baseline: 'baseline (same run)', ratio: 'ratio', target: 'target', verdict: 'ok?' };
  const all = [header, ...rows];
  const keys = Object.keys(header) as (keyof Row)[];
  const widths = keys.map((key) => Math.max(...all.map((row) => row[key].length)));
  const line = (row: Row) => `| ${keys.map((key, index) => row[key].padEnd(widths[index]!)).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
}

export const ms = (value: number) => `${value.toFixed(2)} ms`;
export const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/** CPU seconds a process has used so far (Linux: user + system from /proc). */
export function processCpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds Redis has used so far (its own `INFO cpu`, main thread and children). */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  return Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1]) + Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1]);
}

/**
 * Commands Redis has executed so far (INFO commandstats): all of them, those that scripts call
 * included, and the script calls alone. Unlike CPU time, a count does not move with the
 * machine's speed, so it shows a change in cost that timing noise would hide.
 */
export async function redisCommandCounts(redis: Redis): Promise<RedisCommands> {
  const stats = await redis.info('commandstats');
  let all = 0;
  let scripts = 0;
  for (const [, command, calls] of stats.matchAll(/cmdstat_([\w|]+):calls=(\d+)/g)) {
    if (command === 'info') continue;
    all += Number(calls);
    if (command === 'evalsha' || command === 'eval') scripts += Number(calls);
  }
  return { all, scripts };
}

export interface RedisCommands {
  readonly all: number;
  readonly scripts: number;
}

/** CPU milliseconds per unit of work, split by who spent it. */
export interface CpuSplit {
  readonly redis: number;
  readonly workers: number;
  readonly client: number;
}

/**
 * Measures the CPU that `work` costs Redis, the given worker processes and this process, per
 * `units` (e.g. per run), and the Redis commands it runs. Steadier than throughput on a shared
 * machine: waiting costs nothing.
 */
export async function cpuPer<T>(
  redis: Redis,
  workerPids: readonly number[],
  units: number,
  work: () => Promise<T>,
): Promise<{ result: T; cpu: CpuSplit; commands: RedisCommands }> {
  const workersNow = () => workerPids.reduce((sum, pid) => sum + processCpuSeconds(pid), 0);
  const clientNow = () => {
    const usage = process.cpuUsage();
    return (usage.user + usage.system) / 1e6;
  };
  const commandsBefore = await redisCommandCounts(redis);
  const before = { redis: await redisCpuSeconds(redis), workers: workersNow(), client: clientNow() };
  const result = await work();
  const perUnit = (seconds: number) => (seconds * 1000) / units;
  const cpu = {
    redis: perUnit((await redisCpuSeconds(redis)) - before.redis),
    workers: perUnit(workersNow() - before.workers),
    client: perUnit(clientNow() - before.client),
  };
  const commandsAfter = await redisCommandCounts(redis);
  const commands = { all: (commandsAfter.all - commandsBefore.all) / units, scripts: (commandsAfter.scripts - commandsBefore.scripts) / units };
  return { result, cpu, commands };
}

export const commandsText = (commands: RedisCommands) => `${commands.all.toFixed(0)} (${commands.scripts.toFixed(0)} scripts)`;
export const cpuTotal = (split: CpuSplit) => split.redis + split.workers + split.client;
export const cpuText = (split: CpuSplit) => `${cpuTotal(split).toFixed(2)} ms (R ${split.redis.toFixed(1)} W ${split.workers.toFixed(1)} C ${split.client.toFixed(1)})`;
