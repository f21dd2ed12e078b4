// `npm run chaos`: the long chaos run (the test suite runs a short one). Prints its figures as a table.
//   npm run chaos -- [--runs 3000] [--workers 3] [--kill-every-ms 3000] [--redis-kills 3]
//   npm run chaos -- --streams [--runs 200] [--workers 3] [--kill-every-ms 3000]: streaming runs (SPEC §12)
import { parseArgs } from 'node:util';
import { runChaos } from './chaos.ts';

const { values } = parseArgs({
  options: {
    streams: { type: 'boolean', default: false },
    // 3000 runs by default; 200 with --streams.
    runs: { type: 'string' },
    workers: { type: 'string', default: '3' },
    'kill-every-ms': { type: 'string', default: '3000' },
    'redis-kills': { type: 'string', default: '3' },
    'timeout-ms': { type: 'string', default: '600000' },
  },
});
if (values.streams) {
  const { runStreamChaos } = await import('./stream-chaos.ts');
  const report = await runStreamChaos({
    runs: Number(values.runs ?? 200),
    workers: Number(values.workers),
    killEveryMs: Number(values['kill-every-ms']),
    timeoutMs: Number(values['timeout-ms']),
    log: (line) => process.stderr.write(`chaos: ${line}\n`),
  });
  printTable([
    ['streaming runs', String(report.runs)],
    ['completed', String(report.completed)],
    ['worker SIGKILLs', String(report.workerKills)],
    ['runs with a reset (a call made again)', String(report.runsWithReset)],
    ['chunks read', String(report.chunks)],
    ['gaps / duplicates', `${report.gaps} / ${report.duplicates}`],
    ['seconds', report.seconds.toFixed(1)],
    ['violations', String(report.violations.length)],
  ]);
  for (const violation of report.violations.slice(0, 20)) console.log(`  ${violation}`);
  process.exit(report.violations.length === 0 ? 0 : 1);
}

function printTable(rows: readonly (readonly [string, string])[]): void {
  const width = Math.max(...rows.map(([name]) => name.length));
  console.log(rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`).join('\n'));
}

const redisKills = Number(values['redis-kills']);
const report = await runChaos({
  runs: Number(values.runs ?? 3000),
  workers: Number(values.workers),
  killEveryMs: Number(values['kill-every-ms']),
  redisKillsAtMs: Array.from({ length: redisKills }, (_, index) => 3_000 + index * 8_000),
  timeoutMs: Number(values['timeout-ms']),
  log: (line) => process.stderr.write(`chaos: ${line}\n`),
});
printTable([
  ['runs', String(report.runs)],
  ['completed', String(report.completed)],
  ['not ended', String(report.notEnded)],
  ['worker SIGKILLs', String(report.workerKills)],
  ['Redis SIGKILLs (AOF always)', String(report.redisKills)],
  ['seconds', report.seconds.toFixed(1)],
  ['events', String(report.events)],
  ['tool calls / handler executions', `${report.toolCalls} / ${report.toolExecutions}`],
  ['violations', String(report.violations.length)],
]);
for (const violation of report.violations.slice(0, 20)) console.log(`  ${violation}`);
process.exit(report.violations.length === 0 ? 0 : 1);
