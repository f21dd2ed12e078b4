// One arm of an A/B throughput comparison (see ab.ts): its own worker processes, from the code
// at ROOT (this tree or a git worktree of an older commit), and its own client and key prefix.
// It runs a trial when the parent asks and answers with the trial's rate.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
// The trial itself is this tree's, whichever tree the arm's client and workers come from.
import { engineTrial } from '../throughput.ts';

const root = resolve(process.env.AB_ROOT ?? '.');
const prefix = process.env.AB_PREFIX ?? `ab-${process.pid}`;
const workers = Number(process.env.AB_WORKERS ?? '1');
const nodeFlags = (process.env.AB_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const workerArgs = (process.env.AB_WORKER_ARGS ?? '').split(' ').filter(Boolean);

const { createClient } = await import(`${root}/packages/queue/src/index.ts`);
// The Redis helpers alone: the testing package's index also loads the scenario suite, which needs a test runner.
const { cleanupPrefix } = await import(`${root}/packages/testing/src/redis.ts`);
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const env = { ...process.env, REDIS_URL: redisUrl, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };

const children = await Promise.all(
  Array.from({ length: workers }, async () => {
    // Without flags, the command itself, as npx runs it: its shebang decides Node's flags.
    const command = [`${root}/apps/cli/bin/arcflow.js`, 'worker', '--module', `${root}/bench/agents.ts`, ...workerArgs];
    const [file, ...args] = nodeFlags.length > 0 ? [process.execPath, ...nodeFlags, ...command] : command;
    const child = spawn(file!, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((ready) => child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && ready()));
    return child;
  }),
);
const client = createClient({ redis: redisUrl, prefix });

process.on('message', async (message: { trial?: number; stop?: true }) => {
  if (message.stop) {
    await client.close();
    await Promise.all(
      children.map(
        (child) =>
          new Promise((done) => {
            child.once('exit', done);
            child.kill('SIGTERM');
          }),
      ),
    );
    await cleanupPrefix(prefix, redisUrl);
    process.send!({ stopped: true }, () => process.exit(0));
    return;
  }
  process.send!({ rate: await engineTrial(client, message.trial!) });
});
process.send!({ ready: true, pids: children.map((child) => child.pid) });
