// backend.ts
import { createClient } from 'arcflow';

// The same Redis and prefix as the workers: given neither, it reads REDIS_URL and ARCFLOW_PREFIX as the CLI does.
const client = createClient();
// The same key with the same request returns the same run; with another request it throws 'idempotency_conflict'.
// An unknown option (`threadId`) is refused naming the nearest one (`thread_id`).
const { run_id } = await client.enqueue({ agent: 'researcher', input: 'Weather in Oslo?', idempotency_key: 'order-123' });
const run = await client.wait(run_id, { timeout_ms: 60_000 }); // { status, output, error, usage, iterations, … }
console.log(run.status, run.output);
const { runs, next_cursor } = await client.list({ status: 'failed', limit: 20 }); // newest first
console.log(`${runs.length} failed runs${next_cursor ? ', and more' : ''}`);
await client.close(); // lets the process exit
// A call that cannot reach Redis within 5 s (redis_timeout_ms) throws RequestError 'redis_unavailable';
// at once when nothing listens at the address (ECONNREFUSED at host:port). A URL of another scheme
// than redis://, rediss:// or a unix socket's path is refused by createClient itself.
