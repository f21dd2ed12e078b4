import { existsSync } from 'node:fs';
import { type FakeOpenAIServer, TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedAnswer, startStreamFake } from '../../../packages/queue/test/fixtures/stream-fake.ts';
import { type ServeProcess, spawnServe } from './harness.ts';

const FIXTURE = new URL('../../../packages/queue/test/fixtures/stream-agents.ts', import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const prefix = testPrefix('console-stream');
const KEY = 'console-stream-secret-0123456789';
let serve: ServeProcess;
let worker: WorkerProcess;
let browser: Browser;
let fake: FakeOpenAIServer;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH`);
  fake = await startStreamFake({ delay_ms: 40 });
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
  [serve, worker, browser] = await Promise.all([
    spawnServe({ ...env, ARCFLOW_API_KEYS: `ops:${KEY}:admin` }),
    spawnWorker(FIXTURE, { env: { ...env, STREAM_FAKE_URL: fake.url } }),
    chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] }),
  ]);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all([serve?.stop(), worker?.stop()]);
  await fake?.close();
  await cleanupPrefix(prefix);
});

describe('the web console shows a run’s text as the model writes it (SPEC §12)', () => {
  it('grows the text on the run page while the run is running, and ends with the whole answer', async () => {
    const page = await browser.newPage();
    await page.goto(serve.url);
    await page.fill('input[name=key]', KEY);
    await page.click('button[type=submit]');
    await page.getByText('ops (admin)').waitFor();
    const response = await fetch(`${serve.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent: 'stream_agent', input: 'shown live' }),
    });
    const { run_id } = (await response.json()) as { run_id: string };
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    const text = page.locator('[data-text="s1#2"] pre');
    await page.waitForFunction(() => (document.querySelector('[data-text="s1#2"] pre')?.textContent ?? '').length > 20, undefined, { timeout: 15_000 });
    const partial = (await text.textContent()) ?? '';
    const status = ((await (await fetch(`${serve.url}/v1/runs/${run_id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { status: string }).status;
    expect(status).toBe('running');
    const answer = expectedAnswer('shown live');
    expect(answer.startsWith(partial)).toBe(true);
    expect(partial.length).toBeLessThan(answer.length);
    await page.waitForFunction((whole) => document.querySelector('[data-text="s1#2"] pre')?.textContent === whole, answer, { timeout: 15_000 });
    await page.close();
  });
});
