import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';

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
