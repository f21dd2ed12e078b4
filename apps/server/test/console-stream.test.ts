import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedAnswer } from '../../../packages/queue/test/fixtures/stream-fake.ts';
import { launchChromium, signIn } from './harness.ts';
import { type StreamStack, startStreamStack } from './stream-stack.ts';

const KEY = 'console-stream-secret-0123456789';
let stack: StreamStack;
let browser: Browser;

beforeAll(async () => {
  [browser, stack] = await Promise.all([launchChromium(), startStreamStack('console-stream', `ops:${KEY}:admin`, 40)]);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

describe('the web console shows a run’s text as the model writes it (SPEC §12)', () => {
  it('grows the text on the run page while the run is running, and ends with the whole answer', async () => {
    const page = await browser.newPage();
    await signIn(page, stack.serve.url, KEY, 'ops (admin)');
    const response = await fetch(`${stack.serve.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent: 'stream_agent', input: 'shown live' }),
    });
    const { run_id } = (await response.json()) as { run_id: string };
    await page.goto(`${stack.serve.url}/#/runs/${run_id}`);
    const text = page.locator('[data-text="s1#2"] pre');
    await page.waitForFunction(() => (document.querySelector('[data-text="s1#2"] pre')?.textContent ?? '').length > 20, undefined, { timeout: 15_000 });
    const partial = (await text.textContent()) ?? '';
    const status = ((await (await fetch(`${stack.serve.url}/v1/runs/${run_id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { status: string }).status;
    expect(status).toBe('running');
    const answer = expectedAnswer('shown live');
    expect(answer.startsWith(partial)).toBe(true);
    expect(partial.length).toBeLessThan(answer.length);
    await page.waitForFunction((whole) => document.querySelector('[data-text="s1#2"] pre')?.textContent === whole, answer, { timeout: 15_000 });
    await page.close();
  });

  it("shows the text a thread's run is writing as a growing answer in the conversation, then the answer itself", async () => {
    const page = await browser.newPage();
    await signIn(page, stack.serve.url, KEY, 'ops (admin)');
    const thread = `live-${stack.prefix}`;
    const response = await fetch(`${stack.serve.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent: 'stream_agent', input: 'told in a thread', thread_id: thread }),
    });
    const { run_id } = (await response.json()) as { run_id: string };
    await page.goto(`${stack.serve.url}/#/threads/${encodeURIComponent(thread)}`);
    const live = `[data-live-run="${run_id}"] p`;
    await page.waitForFunction((selector) => (document.querySelector(selector)?.textContent ?? '').length > 20, live, { timeout: 15_000 });
    const partial = (await page.locator(live).textContent()) ?? '';
    const answer = expectedAnswer('told in a thread');
    expect(answer.startsWith(partial)).toBe(true);
    expect(partial.length).toBeLessThan(answer.length);
    // Once the run completes, the thread holds the answer, and nothing is left writing.
    await page.locator('.message.assistant:not(.live)', { hasText: answer }).waitFor({ timeout: 15_000 });
    await page.locator('[data-live-run]').waitFor({ state: 'detached' });
    expect(await page.locator('.message.user').textContent()).toBe('usertold in a thread');
    await page.close();
  });
});
