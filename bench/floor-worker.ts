// The design's floor for the throughput bench: a run's BullMQ jobs as arcflow makes them (the
// first provider job fans out 8 tool jobs with arcflow's data, ids and options; the tool job that
// settles the round adds provider job 2, which ends the run), with no run store, events or
// engine logic. What arcflow costs above this is the store and the loop.
import { hashTag } from '@arcflow/queue';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { coalesceWrites } from '../packages/queue/src/redis/writes.ts';
import { FLOOR_PROVIDER_WORKER, FLOOR_QUEUES, FLOOR_TOOL_WORKER, FLOOR_WORKER_OPTIONS, addJob, floorDoneChannel, floorProviderJob, floorToolJob } from './floor-jobs.ts';

const [prefix = 'bench', fan = '8'] = process.argv.slice(2);
const FAN = Number(fan);
const tag = hashTag(prefix);
const connection = coalesceWrites(new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null }));
const options = { connection, prefix: tag, ...FLOOR_WORKER_OPTIONS };
const providers = new Queue(FLOOR_QUEUES.provider, { connection, prefix: tag });
const tools = new Queue(FLOOR_QUEUES.tool, { connection, prefix: tag });

const provider = new Worker(
  FLOOR_QUEUES.provider,
  async (job) => {
    const { run_id, iteration } = job.data as { run_id: string; iteration: number };
    if (iteration === 2) return connection.publish(floorDoneChannel(prefix), run_id);
    await connection.hset(`${tag}:floor-open`, run_id, FAN);
    await Promise.all(Array.from({ length: FAN }, (_, index) => addJob(tools, floorToolJob(run_id, index))));
    return 'ok';
  },
  { ...options, ...FLOOR_PROVIDER_WORKER },
);
const tool = new Worker(
  FLOOR_QUEUES.tool,
  async (job) => {
    const { run_id } = job.data as { run_id: string };
    if ((await connection.hincrby(`${tag}:floor-open`, run_id, -1)) === 0) await addJob(providers, floorProviderJob(run_id, 2));
    return 'recorded';
  },
  { ...options, ...FLOOR_TOOL_WORKER },
);
await Promise.all([provider.waitUntilReady(), tool.waitUntilReady()]);
process.stdout.write('arcflow worker floor ready\n');
process.on('SIGTERM', () => void Promise.all([provider.close(), tool.close()]).then(() => process.exit(0)));
