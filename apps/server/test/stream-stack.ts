import { type FakeOpenAIServer, TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { startStreamFake } from '../../../packages/queue/test/fixtures/stream-fake.ts';
import { type ServeProcess, spawnServe } from './harness.ts';

const FIXTURE = new URL('../../../packages/queue/test/fixtures/stream-agents.ts', import.meta.url).pathname;

/** `arcflow serve`, a worker on the streaming fixture and the streaming fake server, under a fresh prefix. */
export interface StreamStack {
  readonly prefix: string;
  readonly serve: ServeProcess;
  readonly worker: WorkerProcess;
  readonly fake: FakeOpenAIServer;
  stop(): Promise<void>;
}

/**
 * Starts the stack the streaming tests of the API, the console and `arcflow/ai-sdk` run against;
 * `api_keys` as ARCFLOW_API_KEYS, `serveEnv` more of serve's environment; `model` paces the fake's
 * answers (chunk size, length), or `model.server` is the fake to use (the stack closes it).
 */
export async function startStreamStack(
  name: string,
  api_keys: string,
  fakeDelayMs: number,
  serveEnv: Record<string, string> = {},
  model: { chunk_chars?: number; chars?: number; server?: FakeOpenAIServer } = {},
): Promise<StreamStack> {
  const prefix = testPrefix(name);
  const { server, ...pacing } = model;
  const fake = server ?? (await startStreamFake({ delay_ms: fakeDelayMs, ...pacing }));
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
  const [serve, worker] = await Promise.all([
    spawnServe({ ...env, ARCFLOW_API_KEYS: api_keys, ARCFLOW_SSE_HEARTBEAT_MS: '200', ...serveEnv }),
    spawnWorker(FIXTURE, { env: { ...env, STREAM_FAKE_URL: fake.url } }),
  ]);
  return {
    prefix,
    serve,
    worker,
    fake,
    async stop() {
      await Promise.all([serve.stop(), worker.stop()]);
      await fake.close();
      await cleanupPrefix(prefix);
    },
  };
}
