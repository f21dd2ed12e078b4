// Where Redis spends its time per tool call, script by script: Redis's SLOWLOG with every command
// logged (`slowlog-log-slower-than 0`) during one arcflow trial and one plain BullMQ trial. A
// command a script calls is logged (from client `?:0`) just before the script, so each script's
// own commands are told apart from the script call around them. Logging every command slows Redis itself: compare
// the two sides, not the absolute figures.
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createClient } from '@arcflow/queue';
import { cleanupPrefix } from '@arcflow/testing';
import { spawnWorker } from '@arcflow/worker';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { SCRIPTS } from '../packages/queue/src/scripts.ts';
import { TENANCY_SCRIPTS } from '../packages/queue/src/tenancy/scripts.ts';
import { REDIS_URL } from './lib.ts';
import { BENCH_AGENTS } from './processes.ts';
import { FAN, RUNS, engineTrial } from './throughput.ts';

const SLOWLOG_LENGTH = 400_000;

/** One script's cost per run of FAN calls (arcflow) or per FAN jobs (plain BullMQ). */
export interface ScriptCost {
  readonly script: string;
  readonly callsPerRun: number;
  readonly usPerCall: number;
  /** Of `usPerCall`, the time in the Redis commands the script called. */
  readonly commandsUsPerCall: number;
}

/** Per-script costs of arcflow (one worker process) and of plain BullMQ no-op jobs, most expensive first. */
export async function scriptCosts(prefix: string): Promise<{ arcflow: ScriptCost[]; plain: ScriptCost[] }> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const names = scriptNames();
  const setting = async (name: string) => ((await redis.config('GET', name)) as string[])[1]!;
  const [slowerThan, maxLength] = [await setting('slowlog-log-slower-than'), await setting('slowlog-max-len')];
  await redis.config('SET', 'slowlog-max-len', String(SLOWLOG_LENGTH));
  const logged = async (work: () => Promise<unknown>) => {
    await redis.slowlog('RESET');
    await redis.config('SET', 'slowlog-log-slower-than', '0');
    try {
      await work();
    } finally {
      await redis.config('SET', 'slowlog-log-slower-than', String(slowerThan));
    }
    const log = ((await redis.slowlog('GET', SLOWLOG_LENGTH)) as SlowlogEntry[]).reverse();
    await redis.slowlog('RESET');
    return perScript(log, names);
  };
  const worker = await spawnWorker(BENCH_AGENTS, { env: { REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' } });
  const client = createClient({ redis: REDIS_URL, prefix });
  const plain = await PlainBullMQ.start(`${prefix}-plain`);
  try {
    // Each side warm (a trial first), then one trial logged.
    await engineTrial(client, 0);
    const arcflow = await logged(() => engineTrial(client, 1));
    await plain.trial();
    return { arcflow, plain: await logged(() => plain.trial()) };
  } finally {
    await redis.config('SET', 'slowlog-max-len', String(maxLength));
    await client.close();
    await worker.stop();
    await plain.close();
    await cleanupPrefix(`${prefix}-plain`, REDIS_URL);
    await redis.quit();
  }
}

/** A SLOWLOG entry; `client` is `?:0` for a command a script called. */
type SlowlogEntry = [id: number, at: number, us: number, args: string[], client: string];
const SCRIPT_CLIENT = '?:0';

/** Plain BullMQ: RUNS × FAN no-op jobs added in bulk, one Worker at concurrency 64. */
class PlainBullMQ {
  private done = 0;
  private finished: () => void = () => undefined;

  private constructor(
    private readonly connection: Redis,
    private readonly workerConnection: Redis,
    private readonly queue: Queue,
    private readonly worker: Worker,
  ) {
    worker.on('completed', () => {
      this.done += 1;
      if (this.done % (RUNS * FAN) === 0) this.finished();
    });
  }

  static async start(prefix: string): Promise<PlainBullMQ> {
    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const queue = new Queue('plain', { connection, prefix: `{${prefix}}` });
    const workerConnection = connection.duplicate();
    const worker = new Worker('plain', async () => 'ok', { connection: workerConnection, prefix: `{${prefix}}`, concurrency: 64 });
    await worker.waitUntilReady();
    return new PlainBullMQ(connection, workerConnection, queue, worker);
  }

  async trial(): Promise<void> {
    const all = new Promise<void>((resolve) => (this.finished = resolve));
    for (let batch = 0; batch < RUNS * FAN; batch += 400) await this.queue.addBulk(Array.from({ length: 400 }, (_, index) => ({ name: 'noop', data: { batch, index } })));
    await all;
  }

  async close(): Promise<void> {
    await this.worker.close();
    await this.queue.close();
    await this.workerConnection.quit();
    await this.connection.quit();
  }
}

/** Script names by the SHA1 of their text: BullMQ's (from its package), the run store's and the tenancy scripts. */
function scriptNames(): Map<string, string> {
  const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
  const names = new Map(Object.entries({ ...SCRIPTS, ...TENANCY_SCRIPTS }).map(([name, script]) => [sha1(script.lua), `store ${name}`]));
  const require = createRequire(import.meta.url);
  const dir = require.resolve('bullmq').replace(/index\.js$/, 'scripts/');
  for (const file of readdirSync(dir).filter((name) => /-\d+\.js$/.test(name))) {
    for (const value of Object.values(require(dir + file) as Record<string, { name?: string; content?: string }>)) {
      if (value?.content && value.name) names.set(sha1(value.content), `BullMQ ${value.name}`);
    }
  }
  return names;
}

function perScript(log: readonly SlowlogEntry[], names: ReadonlyMap<string, string>): ScriptCost[] {
  const totals = new Map<string, { calls: number; us: number; commandsUs: number }>();
  let commandsUs = 0;
  for (const [, , us, args, client] of log) {
    if (client === SCRIPT_CLIENT) {
      commandsUs += Number(us);
      continue;
    }
    if (String(args[0]).toLowerCase() !== 'evalsha') continue;
    const script = names.get(String(args[1])) ?? `script ${String(args[1]).slice(0, 8)}`;
    const total = totals.get(script) ?? { calls: 0, us: 0, commandsUs: 0 };
    total.calls += 1;
    total.us += Number(us);
    total.commandsUs += commandsUs;
    totals.set(script, total);
    commandsUs = 0;
  }
  return [...totals]
    .map(([script, { calls, us, commandsUs: inner }]) => ({ script, callsPerRun: calls / RUNS, usPerCall: us / calls, commandsUsPerCall: inner / calls }))
    .sort((a, b) => b.callsPerRun * b.usPerCall - a.callsPerRun * a.usPerCall);
}
