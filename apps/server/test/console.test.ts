import { mkdirSync, readFileSync } from 'node:fs';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, launchChromium, signIn as signInAs, spawnServe } from './harness.ts';

const FIXTURE = new URL('./fixtures/api-agents.ts', import.meta.url).pathname;
/** A coordinator that asks a researcher as a tool: each of its runs starts a child run (SPEC §13). */
const CHILD_FIXTURE = new URL('./fixtures/console-agents.ts', import.meta.url).pathname;
const SCREENSHOTS = new URL('../../../docs/images/', import.meta.url).pathname;
const prefix = testPrefix('console');
const KEY = 'console-admin-secret-0123456789';
const READ_KEY = 'console-read-secret-0123456789';
let serve: ServeProcess;
let worker: WorkerProcess;
let childWorker: WorkerProcess;
let browser: Browser;

beforeAll(async () => {
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
  [browser, serve, worker, childWorker] = await Promise.all([
    launchChromium(),
    spawnServe({
      ...env,
      ARCFLOW_API_KEYS: `ops:${KEY}:admin,viewer:${READ_KEY}:read`,
      ARCFLOW_TRACE_URL: 'http://localhost:16686/trace/{trace_id}',
      ARCFLOW_TOKEN_SECRET: 'console-token-secret-0123456789-abcdef',
    }),
    spawnWorker(FIXTURE, { env }),
    spawnWorker(CHILD_FIXTURE, { env }),
  ]);
  mkdirSync(SCREENSHOTS, { recursive: true });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all([serve?.stop(), worker?.stop(), childWorker?.stop()]);
  await cleanupPrefix(prefix);
});

/** Signs the page in with the admin key, as a person would. */
async function signIn(page: Page): Promise<void> {
  await signInAs(page, serve.url, KEY, 'ops (admin)');
}

/** Enqueues a run over the API, from outside the browser; its id. */
async function enqueue(body: { agent: string; input: string; thread_id?: string; state?: Record<string, unknown>; tenant?: string }): Promise<string> {
  const response = await fetch(`${serve.url}/v1/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return ((await response.json()) as { run_id: string }).run_id;
}

describe("the web console's sources", () => {
  it('listens on its event stream for every kind of event there is', () => {
    // EventSource delivers a named event only to a listener for its name: a kind left out never shows.
    const matches = (text: string, pattern: RegExp) => [...text.matchAll(pattern)].map((match) => match[1]).sort();
    const core = matches(readFileSync(new URL('../../../packages/core/src/events/types.ts', import.meta.url), 'utf8'), /readonly kind: '(\w+)'/g);
    const hooks = readFileSync(new URL('../console/hooks.ts', import.meta.url), 'utf8');
    const kinds = hooks.slice(hooks.indexOf('const KINDS'));
    const listened = matches(kinds.slice(0, kinds.indexOf(']')), /'(\w+)'/g);
    expect(core.length).toBeGreaterThan(20);
    expect(listened).toEqual(core);
  });
});

describe('the web console, in a real Chromium', () => {
  it('refuses a wrong key, signs in with a right one, shows a run appear and finish live, and its tool calls', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    // The page runs under its Content-Security-Policy, and nothing it does breaks it.
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    const served = await page.goto(serve.url);
    expect(served?.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.fill('input[name=key]', 'not-the-key-0000000000');
    await page.click('button[type=submit]');
    await page.getByText('that key is not valid').waitFor();
    await page.fill('input[name=key]', KEY);
    await page.click('button[type=submit]');
    await page.getByText('ops (admin)').waitFor();
    const cookies = await page.context().cookies();
    expect(cookies.find((cookie) => cookie.name === 'arcflow_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });

    // A run enqueued from outside shows up in the open list and turns completed without a reload.
    const run_id = await enqueue({ agent: 'api_agent', input: 'wait=1500 seen live' });
    const row = page.locator(`tr[data-run="${run_id}"]`);
    await row.locator('.badge', { hasText: /queued|running/ }).waitFor({ timeout: 10_000 });
    await row.locator('.badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    await page.screenshot({ path: `${SCREENSHOTS}console-runs.png` });

    await row.locator('a').click();
    await page.locator('tr[data-call="call_1"]').getByText('completed').waitFor();
    await page.locator('tr[data-call="call_2"]').getByText('completed').waitFor();
    await page.locator('tr[data-seq]').filter({ hasText: 'RunCompleted' }).waitFor();
    expect(await page.locator('a[href^="http://localhost:16686/trace/"]').count()).toBe(1);
    await page.screenshot({ path: `${SCREENSHOTS}console-run.png`, fullPage: true });

    // Usable on a phone: the run page fits a narrow screen.
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    expect(violations).toEqual([]);
    await page.close();
  });

  it("shows each run's tenant and lists one tenant's runs when asked (SPEC §14)", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(serve.url);
    await signIn(page);
    const acme = await enqueue({ agent: 'api_agent', input: 'wait=1 for acme', tenant: 'acme' });
    const other = await enqueue({ agent: 'api_agent', input: 'wait=1 for no tenant' });
    await page.locator(`tr[data-run="${acme}"] td.tenant`, { hasText: 'acme' }).waitFor();
    await page.locator(`tr[data-run="${other}"] td.tenant`, { hasText: 'default' }).waitFor();
    await page.fill('input[aria-label=tenant]', 'acme');
    await page.locator(`tr[data-run="${other}"]`).waitFor({ state: 'detached' });
    expect(await page.locator(`tr[data-run="${acme}"]`).count()).toBe(1);
    // The tenant's standing above its runs: once its one run has ended, nothing active or queued (its model is not priced).
    await page.locator(`tr[data-run="${acme}"] .badge`, { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    await page.locator('.tenant-standing[data-tenant=acme]', { hasText: 'acme: 0 active, 0 queued, $0.0000 spent today (UTC)' }).waitFor();
    await page.fill('input[aria-label=tenant]', 'not a tenant');
    await page.locator('.tenant-standing').waitFor({ state: 'detached' });
    // A tenant with no runs: the page says no run matches (not that there are no runs).
    await page.fill('input[aria-label=tenant]', 'nobody-at-all');
    await page.locator('p.muted', { hasText: 'No run matches.' }).waitFor();
    await page.close();
  });

  it("shows a thread's messages as a conversation and its runs, reached from a run's page", async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    const page = await context.newPage();
    await signIn(page);
    const thread = `console-${prefix}`;
    const first = await enqueue({ agent: 'api_agent', input: 'wait=10 first question', thread_id: thread });
    const second = await enqueue({ agent: 'api_agent', input: 'wait=10 second question', thread_id: thread });
    await page.goto(`${serve.url}/#/runs/${first}`);
    await page.locator(`a[href="#/threads/${encodeURIComponent(thread)}"]`).click();
    await page.locator(`tr[data-run="${second}"] .badge`, { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    await page.locator('.message.user', { hasText: 'second question' }).waitFor({ timeout: 5_000 });
    expect(await page.locator('.message.user').allTextContents()).toEqual(['userwait=10 first question', 'userwait=10 second question']);
    expect(await page.locator('.message.tool').count()).toBeGreaterThan(0);
    await page.screenshot({ path: `${SCREENSHOTS}console-thread.png`, fullPage: true });
    await context.close();
  });

  it("mints an end user's token for a thread, showing the server's refusal of a bad one; a run the token enqueues says so on its page", async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    await signIn(page);
    const thread = `token-${prefix}`;
    await enqueue({ agent: 'api_agent', input: 'wait=1 by the backend', thread_id: thread });
    await page.goto(`${serve.url}/#/threads/${encodeURIComponent(thread)}`);
    // read and send are ticked; send without agents is refused by the server, which says why.
    await page.getByRole('button', { name: 'Mint token' }).click();
    await page.locator('.card .error', { hasText: 'send needs agents' }).waitFor();
    await page.fill('input[name=agents]', 'api_agent');
    await page.fill('input[name=subject]', 'console-user');
    await page.getByRole('button', { name: 'Mint token' }).click();
    const token = (await page.locator('pre[data-token]').textContent())!.trim();
    expect(token).toMatch(/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
    await page.screenshot({ path: `${SCREENSHOTS}console-token.png`, fullPage: true });
    const response = await fetch(`${serve.url}/v1/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent: 'api_agent', input: 'wait=1 by the user' }),
    });
    const { run_id } = (await response.json()) as { run_id: string };
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    expect(await page.locator('[data-fact="enqueued-by"]').textContent()).toBe('enqueued bytoken:console-user');
    await context.close();
    // A browser that never signed in follows the run with an EventSource, which cannot send headers: ?token=.
    const visitor = await browser.newContext();
    const viewer = await visitor.newPage();
    await viewer.goto(serve.url);
    const kinds = await viewer.evaluate(
      ([path, given]) =>
        new Promise<string[]>((resolve, reject) => {
          const seen: string[] = [];
          const source = new EventSource(`${path}?token=${encodeURIComponent(given!)}`);
          for (const kind of ['RunEnqueued', 'RunCompleted']) {
            source.addEventListener(kind, () => {
              seen.push(kind);
              if (kind === 'RunCompleted') {
                source.close();
                resolve(seen);
              }
            });
          }
          source.onerror = () => (source.readyState === EventSource.CLOSED ? reject(new Error('the event stream was refused')) : undefined);
        }),
      [`/v1/runs/${run_id}/events`, token],
    );
    expect(kinds).toEqual(['RunEnqueued', 'RunCompleted']);
    await visitor.close();
  });

  it("shows a workflow run's graph with each step's status", async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    const page = await context.newPage();
    await signIn(page);
    const run_id = await enqueue({ agent: 'api_flow', input: 'graph' });
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    await page.locator('svg.workflow g.node[data-step="prepare"][data-status="completed"]').waitFor({ timeout: 15_000 });
    await page.locator('svg.workflow g.node[data-step="answer"][data-status="completed"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('svg.workflow g.node[data-step="answer"] > title').textContent()).toBe('answer, after prepare');
    expect(await page.locator('svg.workflow path.edge').evaluateAll((paths) => paths.map((path) => path.getAttribute('data-edge')))).toEqual(['prepare->answer']);
    await page.locator('[data-step-view="prepare"] tr[data-call="prepare"]').getByText('completed').waitFor();
    await page.screenshot({ path: `${SCREENSHOTS}console-workflow.png`, fullPage: true });
    await context.close();
  });

  it('lists the calls waiting for approval with their arguments, and approves one with a click', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page);
    const run_id = await enqueue({ agent: 'api_approver', input: 'refund' });
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    const row = page.locator('tr[data-approval="c_refund"]');
    await row.getByText('{"order":"o-7"}').waitFor({ timeout: 15_000 });
    await page.locator('.facts .badge', { hasText: 'waiting' }).waitFor();
    // A read key sees the waiting call, and neither Approve nor Reject nor Cancel.
    const viewer = await browser.newContext();
    const viewing = await viewer.newPage();
    await signInAs(viewing, serve.url, READ_KEY, 'viewer (read)');
    await viewing.goto(`${serve.url}/#/runs/${run_id}`);
    await viewing.locator('tr[data-approval="c_refund"]').getByText('{"order":"o-7"}').waitFor({ timeout: 15_000 });
    expect(await viewing.getByRole('button', { name: /Approve|Reject|Cancel run/ }).count()).toBe(0);
    await viewer.close();
    await row.getByRole('button', { name: 'Approve' }).click();
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    expect(await page.locator('tr[data-approval]').count()).toBe(0);
    // The wait is a bar of its own on the timeline, from the request to the answer, before the call it let run.
    const wait = page.locator('[data-section="timeline"] rect.bar[data-kind="approval"][data-outcome="waiting"]');
    expect(await wait.locator('title').textContent()).toMatch(/^approval of api_refund · [\d.]+ m?s · waiting \(approved\)$/);
    const refund = page.locator('[data-section="timeline"] rect.bar[data-kind="tool"][data-outcome="completed"]');
    await refund.waitFor();
    const right = async (bar: typeof wait) => Number(await bar.getAttribute('x')) + Number(await bar.getAttribute('width'));
    expect(await right(wait)).toBeLessThanOrEqual(Number(await refund.getAttribute('x')) + 1);
    await context.close();
  });

  it('forks an ended run from an iteration with a click and opens the fork; bulk actions show to admin keys only (SPEC §15)', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page);
    const run_id = await enqueue({ agent: 'api_agent', input: 'wait=10 fork me' });
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    // A finished run has no Cancel or Retry; it forks from the iteration given (its last by default).
    expect(await page.getByRole('button', { name: /Cancel run|Retry/ }).count()).toBe(0);
    expect(await page.getByLabel('fork iteration').inputValue()).toBe('3');
    await page.getByLabel('fork iteration').fill('2');
    await page.getByRole('button', { name: 'Fork from iteration' }).click();
    const forked = page.locator(`[data-forked-from="${run_id}"]`);
    await forked.waitFor({ timeout: 15_000 });
    expect(await forked.textContent()).toContain('at iteration 2');
    expect(page.url()).not.toContain(run_id);
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    // A bad iteration shows the server's refusal.
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    await page.getByLabel('fork iteration').fill('9');
    await page.getByRole('button', { name: 'Fork from iteration' }).click();
    await page.locator('[data-section="actions"] .error', { hasText: 'from 1 to 3' }).waitFor();
    // Bulk actions: an admin key, a status chosen; a dry run says what it would do.
    await page.goto(`${serve.url}/#/runs`);
    await page.getByLabel('status').selectOption('completed');
    await page.getByRole('button', { name: 'Cancel all completed: dry run' }).click();
    await page.locator('[data-bulk-outcome]', { hasText: 'cancel would act on 0' }).waitFor();
    // A read key sees neither fork nor bulk actions.
    const viewer = await browser.newContext();
    const viewing = await viewer.newPage();
    await signInAs(viewing, serve.url, READ_KEY, 'viewer (read)');
    await viewing.goto(`${serve.url}/#/runs/${run_id}`);
    await viewing.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    expect(await viewing.getByRole('button', { name: /Fork|Retry/ }).count()).toBe(0);
    await viewing.goto(`${serve.url}/#/runs`);
    await viewing.getByLabel('status').selectOption('completed');
    expect(await viewing.locator('[data-section="bulk"]').count()).toBe(0);
    await viewer.close();
    await context.close();
  });

  it("shows a run's state as it stands and, per round, the keys that round changed", async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    const page = await context.newPage();
    await signIn(page);
    // Each of the two rounds' calls appends `lima-<round>` to the facts.
    const run_id = await enqueue({ agent: 'api_agent', input: 'wait=10 fact=lima', state: { facts: ['given'], trip: { days: 3 } } });
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    const section = page.locator('[data-section="state"]');
    await section.locator('tr[data-state-round="s1#2"]').waitFor({ timeout: 5_000 });
    expect(JSON.parse((await section.locator('pre.state').textContent()) ?? '')).toEqual({ facts: ['given', 'lima-1', 'lima-2'], trip: { days: 3 } });
    expect(await section.locator('pre.state').textContent()).toContain('\n  "trip": {\n    "days": 3\n  }');
    const rows = await section.locator('tr[data-state-round]').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    const size = (facts: string[]) => `${JSON.stringify({ facts, trip: { days: 3 } }).length} B`;
    expect(rows).toEqual([
      ['1', 'facts', size(['given', 'lima-1'])],
      ['2', 'facts', size(['given', 'lima-1', 'lima-2'])],
    ]);
    await section.screenshot({ path: `${SCREENSHOTS}console-state.png` });

    // A run given no state shows {} and says no round changed it.
    const plain = await enqueue({ agent: 'api_agent', input: 'wait=1 plain' });
    await page.goto(`${serve.url}/#/runs/${plain}`);
    // The page shows the earlier run's record until the new one's first answer: wait for its id.
    await page.locator('h2.mono', { hasText: plain }).waitFor();
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    await section.locator('pre.state', { hasText: /^\{\}$/ }).waitFor();
    await section.getByText('No round has changed the state.').waitFor();
    await context.close();
  });

  it("links an agent tool's call to the child run it started, and the child run back to its parent", async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    const page = await context.newPage();
    await signIn(page);
    const parent = await enqueue({ agent: 'coordinator', input: 'the tides' });
    await page.goto(`${serve.url}/#/runs/${parent}`);
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    await page.locator('p.mono', { hasText: 'got: researched the tides' }).waitFor();
    expect(await page.locator('[data-fact="parent"]').count()).toBe(0);

    // The parent's ToolCallStarted names the child run, as a link; so does the call's row.
    const started = page.locator('tr[data-seq]').filter({ hasText: 'ToolCallStarted' });
    await started.locator('[data-child-run]').waitFor();
    const child = (await started.locator('[data-child-run]').getAttribute('data-child-run')) ?? '';
    expect(child).not.toBe('');
    expect(child).not.toBe(parent);
    const toChild = started.locator(`a[href="#/runs/${encodeURIComponent(child)}"]`);
    expect(await toChild.textContent()).toBe(child);
    expect(await started.locator('[data-child-run]').textContent()).toBe(` child run ${child}`);
    expect(await page.locator(`tr[data-call="ask_1"] a[href="#/runs/${encodeURIComponent(child)}"]`).textContent()).toBe(child);
    // On the timeline, the call that waited for the child run is a child run's bar.
    expect(await page.locator('[data-section="timeline"] rect.bar[data-kind="child"][data-outcome="completed"] title').textContent()).toMatch(
      /^researcher \(child run\) · [\d.]+ m?s · completed$/,
    );
    // The researcher's own run has none: its events start no child.
    expect(await page.locator('tr[data-seq] [data-child-run]').count()).toBe(1);

    // The link opens the child's page, which names its parent run and the parent's call that started it.
    await toChild.click();
    await page.locator('h2.mono', { hasText: child }).waitFor();
    expect(page.url()).toBe(`${serve.url}/#/runs/${encodeURIComponent(child)}`);
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    await page.locator('p.mono', { hasText: /^researched the tides$/ }).waitFor();
    const fact = page.locator('[data-fact="parent"]');
    expect(await fact.textContent()).toBe(`parent run${parent} call ask_1`);
    expect(await page.locator('tr[data-seq] [data-child-run]').count()).toBe(0);

    // And back: the parent link opens the parent's page.
    await fact.locator(`a[href="#/runs/${encodeURIComponent(parent)}"]`).click();
    await page.locator('h2.mono', { hasText: parent }).waitFor();
    expect(page.url()).toBe(`${serve.url}/#/runs/${encodeURIComponent(parent)}`);
    await page.locator(`tr[data-seq] [data-child-run="${child}"]`).waitFor();
    await context.close();
  });

  it('follows a run page live while the run goes on', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page);
    const run_id = await enqueue({ agent: 'api_agent', input: 'wait=1500 watched' });
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    await page.locator('tr[data-seq]').filter({ hasText: 'ToolCallStarted' }).first().waitFor();
    expect(await page.locator('tr[data-seq]').filter({ hasText: 'RunCompleted' }).count()).toBe(0);
    await page.locator('tr[data-seq]').filter({ hasText: 'RunCompleted' }).waitFor({ timeout: 15_000 });
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor();
    await context.close();
  });
});
