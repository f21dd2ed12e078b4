// A raw BullMQ worker process for the throughput baseline: no-op jobs at the given concurrency.
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const [prefix = 'bench', concurrency = '16'] = process.argv.slice(2);
const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
const worker = new Worker('raw-tools', async () => 'ok', { connection, prefix: `{${prefix}}`, concurrency: Number(concurrency) });
await worker.waitUntilReady();
process.stdout.write('arcflow worker raw ready\n');
process.on('SIGTERM', () => void worker.close().then(() => process.exit(0)));
