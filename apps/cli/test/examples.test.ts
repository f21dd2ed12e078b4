import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { type FakeOpenAIServer, TEST_REDIS_URL, cleanupPrefix, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = new URL('../../../', import.meta.url).pathname;
const QUICKSTART = `${ROOT}examples/quickstart/`;
const TSX = `${ROOT}node_modules/.bin/tsx`;
const prefix = testPrefix('examples');
let model: FakeOpenAIServer;
let worker: WorkerProcess;

/** The model: get_weather once, then an answer quoting its result. */
function answer(body: Record<string, any>) {
  const result = (body.messages as { role: string; content: string }[]).find((message) => message.role === 'tool');
  return result ? { type: 'text' as const, content: `It says: ${result.content}` } : { type: 'tools' as const, calls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] };
}

beforeAll(async () => {
  model = await startFakeOpenAI({ fallback: ({ body }) => answer(body) });
  worker = await spawnWorker(`${QUICKSTART}agents.ts`, { env: { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_BASE_URL: model.url, OPENAI_API_KEY: 'k' } });
});
afterAll(async () => {
  await worker?.stop();
  await model?.close();
  await cleanupPrefix(prefix);
});

describe("the README's snippets", () => {
  it('are the files in examples/quickstart, word for word', () => {
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    for (const file of ['agents.ts', 'backend.ts', 'local.ts', 'workflow.ts']) {
      expect(readme, file).toContain(`\`\`\`ts\n${readFileSync(`${QUICKSTART}${file}`, 'utf8')}\`\`\``);
    }
  });

  it('run as written: a worker on agents.ts serves the backend snippet, and runLocal answers in one process', async () => {
    const env = { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_BASE_URL: model.url, OPENAI_API_KEY: 'k' };
    const backend = await run(TSX, [`${QUICKSTART}backend.ts`], { env, timeout: 60_000 });
    expect(backend.stdout).toBe('completed It says: 18°C in Oslo\n0 failed runs\n');
    const local = await run(TSX, [`${QUICKSTART}local.ts`], { env, timeout: 60_000 });
    expect(local.stdout).toMatch(/^It says: 18°C in Oslo \d+\n$/);
  });
});
