import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, launchChromium, spawnServe } from './harness.ts';

const EXAMPLE = new URL('../../../examples/browser-tools/', import.meta.url).pathname;
const ROOT = new URL('../../../', import.meta.url).pathname;
const KEY = 'page-write-0123456789';
const prefix = testPrefix('browser-page');
let serve: ServeProcess;
let worker: WorkerProcess;
let browser: Browser;
let site: Server;
let siteUrl: string;
const out = mkdtempSync(join(tmpdir(), 'arcflow-browser-tools-'));

/** The example page, bundled as its page.html says, served from its own origin. */
async function servePage(): Promise<void> {
  await build({ entryPoints: [join(EXAMPLE, 'page.ts')], bundle: true, format: 'esm', outfile: join(out, 'page.js'), tsconfig: join(ROOT, 'tsconfig.json'), logLevel: 'silent' });
  const files: Record<string, [string, string]> = {
    '/page.html': [readFileSync(join(EXAMPLE, 'page.html'), 'utf8'), 'text/html'],
    '/page.js': [readFileSync(join(out, 'page.js'), 'utf8'), 'text/javascript'],
  };
  site = createServer((request, response) => {
    const file = files[new URL(request.url ?? '/', 'http://x').pathname];
    response.writeHead(file ? 200 : 404, { 'content-type': file?.[1] ?? 'text/plain' }).end(file?.[0] ?? 'not found');
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  const address = site.address() as { port: number };
  siteUrl = `http://127.0.0.1:${address.port}`;
}

beforeAll(async () => {
  [browser] = await Promise.all([launchChromium(), servePage()]);
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
  [serve, worker] = await Promise.all([
    spawnServe({ ...env, ARCFLOW_API_KEYS: `web:${KEY}:write`, ARCFLOW_CORS_ORIGINS: siteUrl }),
    spawnWorker(join(EXAMPLE, 'agents.ts'), { env }),
  ]);
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all([serve?.stop(), worker?.stop()]);
  await new Promise((resolve) => site?.close(resolve));
  rmSync(out, { recursive: true, force: true });
  await cleanupPrefix(prefix);
});

describe('the browser-tools example page in headless Chromium (SPEC §20)', () => {
  it('runs the browser tool and the approval to the answer, with a page reload while the call waits', async () => {
    const context = await browser.newContext({ timezoneId: 'Europe/Oslo' });
    const page = await context.newPage();
    const thread = `page-${prefix}`;
    await page.goto(`${siteUrl}/page.html?api=${encodeURIComponent(serve.url)}&key=${KEY}&chat=${thread}`);
    await page.fill('input[name=message]', 'Book me a table for tonight');
    await page.click('button[type=submit]');
    await page.locator('[data-ask=location]').waitFor({ timeout: 20_000 });
    expect(await page.locator('[data-ask=location] p').textContent()).toBe('The assistant asks for your location (to find a restaurant near you).');
    // The call waits in Redis, not in the page: after a reload the page finds it again.
    await page.reload();
    await page.locator('[data-ask=location]').waitFor({ timeout: 20_000 });
    await page.getByText('Share: Oslo').click();
    await page.locator('[data-ask=approval]').waitFor({ timeout: 20_000 });
    expect(await page.locator('[data-ask=approval] p').textContent()).toBe('Go ahead with book_table?');
    await page.getByText('Confirm').click();
    await page.getByText('You are in Oslo. booked: a table for two tonight in Oslo, 19:30').waitFor({ timeout: 20_000 });
    const runs = (await (await fetch(`${serve.url}/v1/threads/${thread}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { runs: { status: string }[] };
    expect(runs.runs.map((run) => run.status)).toEqual(['completed']);
    await context.close();
  }, 90_000);

  it('shows a waiting call in the console and answers it there with a write key; then the approval', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(serve.url);
    await page.fill('input[name=key]', KEY);
    await page.click('button[type=submit]');
    await page.getByText('web (write)').waitFor();
    const created = await fetch(`${serve.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent: 'concierge', input: 'From the console' }),
    });
    const { run_id } = (await created.json()) as { run_id: string };
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    const row = page.locator('tr[data-result="call_location"]');
    await row.getByText('{"reason":"to find a restaurant near you"}').waitFor({ timeout: 15_000 });
    await page.locator('tr[data-call="call_location"]').getByText('waiting for a result').waitFor({ timeout: 15_000 });
    await row.getByLabel('result').fill('{"city":5}');
    await row.getByRole('button', { name: 'Answer' }).click();
    await page.getByText('city: expected string').waitFor({ timeout: 10_000 });
    await row.getByLabel('result').fill('{"city":"Bergen"}');
    await row.getByRole('button', { name: 'Answer' }).click();
    const approval = page.locator('tr[data-approval="call_booking"]');
    await approval.getByRole('button', { name: 'Approve' }).click({ timeout: 15_000 });
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    expect(await page.locator('tr[data-result]').count()).toBe(0);
    const run = (await (await fetch(`${serve.url}/v1/runs/${run_id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { output: string };
    expect(run.output).toBe('You are in Bergen. booked: a table for two tonight in Bergen, 19:30');
    await context.close();
  }, 60_000);
});
