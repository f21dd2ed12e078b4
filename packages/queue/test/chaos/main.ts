// `npm run chaos`: the long chaos run (the test suite runs a short one). Prints its figures as a table.
//   npm run chaos -- [--runs 3000] [--workers 3] [--kill-every-ms 3000] [--redis-kills 3]
import { parseArgs } from 'node:util';
import { runChaos } from './chaos.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3000' },
    workers: { type: 'string', default: '3' },
    'kill-every-ms': { type: 'string', default: '3000' },
    'redis-kills': { type: 'string', default: '3' },
    'timeout-ms': { type: 'string', default: '600000' },
  },
});
const redisKills = Number(values['redis-kills']);
const report = await runChaos({
  runs: Number(values.runs),
  workers: Number(values.workers),
  killEveryMs: Number(values['kill-every-ms']),
  redisKillsAtMs: Array.from({ length: redisKills }, (_, index) => 3_000 + index * 8_000),
  timeoutMs: Number(values['timeout-ms']),
  log: (line) => process.stderr.write(`chaos: ${line}\n`),
});
const rows: [string, string][] = [
  ['runs', String(report.runs)],
  ['completed', String(report.completed)],
  ['not ended', String(report.notEnded)],
  ['worker SIGKILLs', String(report.workerKills)],
  ['Redis SIGKILLs (AOF always)', String(report.redisKills)],
  ['seconds', report.seconds.toFixed(1)],
  ['events', String(report.events)],
  ['tool calls / handler executions', `${report.toolCalls} / ${report.toolExecutions}`],
  ['violations', String(report.violations.length)],
];
const width = Math.max(...rows.map(([name]) => name.length));
console.log(rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`).join('\n'));
for (const violation of report.violations.slice(0, 20)) console.log(`  ${violation}`);
process.exit(report.violations.length === 0 ? 0 : 1);
