// The design's floor for the throughput bench: a run's BullMQ jobs as arcflow makes them (the
// first provider job fans out 8 tool jobs with arcflow's data, ids and options; the tool job that
// settles the round adds provider job 2, which ends the run), with no run store, events or
// engine logic. What arcflow costs above this is the store and the loop.
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { coalesceWrites } from '../packages/queue/src/redis-writes.ts';

const [prefix = 'bench', fan = '8'] = process.argv.slice(2);
const FAN = Number(fan);
const tag = `{${prefix}}`;
const connection = coalesceWrites(new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null }));
const options = { connection, prefix: tag, lockDuration: 5_000, stalledInterval: 2_000, maxStalledCount: 2, removeOnComplete: { age: 604_800 }, removeOnFail: { age: 604_800 } };
const providers = new Queue('floor-provider', { connection, prefix: tag });
const tools = new Queue('floor-tool', { connection, prefix: tag });
const trace = { traceparent: '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01' };
const join = { queue: 'floor-provider', attempts: 5 };

const provider = new Worker(
  'floor-provider',
  async (job) => {
    const { run_id, iteration } = job.data as { run_id: string; iteration: number };
    if (iteration === 2) return connection.publish(`${tag}:floor-done`, run_id);
    await connection.hset(`${tag}:floor-open`, run_id, FAN);
    await Promise.all(
      Array.from({ length: FAN }, (_, index) => {
        const data = { run_id, step_id: 's1', iteration, index, tool_call_id: `c0_${index}`, tool_name: 'noop', args: { round: 0, index }, input_size_bytes: 22, trace, join };
        return tools.add('noop', data, { jobId: `${run_id}.s1.i1.c0_${index}` });
      }),
    );
    return 'ok';
  },
  { ...options, concurrency: 16, limiter: { max: 1_000_000, duration: 1_000 } },
);
const tool = new Worker(
  'floor-tool',
  async (job) => {
    const { run_id } = job.data as { run_id: string };
    if ((await connection.hincrby(`${tag}:floor-open`, run_id, -1)) === 0) {
      await providers.add('provider', { run_id, step_id: 's1', iteration: 2, trace }, { jobId: `${run_id}.s1.p2`, attempts: 5, backoff: { type: 'fixed', delay: 1_000 } });
    }
    return 'recorded';
  },
  { ...options, concurrency: 64 },
);
await Promise.all([provider.waitUntilReady(), tool.waitUntilReady()]);
process.stdout.write('arcflow worker floor ready\n');
process.on('SIGTERM', () => void Promise.all([provider.close(), tool.close()]).then(() => process.exit(0)));
