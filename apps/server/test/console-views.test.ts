import { mkdirSync } from 'node:fs';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, launchChromium, signIn, spawnServe } from './harness.ts';

// The console's pictures in a real Chromium: a run's timeline, a workflow's graph, the overview's
// charts, a thread as a conversation, and the actions a key's scope allows. The overview's
// screenshot wants minutes of runs: scripts/console-screenshots.ts takes it.
const FIXTURE = new URL('./fixtures/console-views.ts', import.meta.url).pathname;
const SCREENSHOTS = new URL('../../../docs/images/', import.meta.url).pathname;
const prefix = testPrefix('console-views');
const KEYS = { admin: 'views-admin-secret-0123456789', read: 'views-read-secret-0123456789' };
let serve: ServeProcess;
let worker: WorkerProcess;
let browser: Browser;

beforeAll(async () => {
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
  [browser, serve, worker] = await Promise.all([
    launchChromium(),
    spawnServe({ ...env, ARCFLOW_API_KEYS: `ops:${KEYS.admin}:admin,viewer:${KEYS.read}:read`, ARCFLOW_API_RATE: '1000' }),
    spawnWorker(FIXTURE, { env }),
  ]);
  mkdirSync(SCREENSHOTS, { recursive: true });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all([serve?.stop(), worker?.stop()]);
  await cleanupPrefix(prefix);
});

/** A page signed in with a key, as a person would, that fails the test on any Content-Security-Policy violation. */
async function signedIn(key: keyof typeof KEYS = 'admin', width = 1200): Promise<{ page: Page; violations: string[]; close: () => Promise<void> }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  const page = await context.newPage();
  const violations: string[] = [];
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
  });
  await signIn(page, serve.url, KEYS[key], key === 'admin' ? 'ops (admin)' : 'viewer (read)');
  return { page, violations, close: () => context.close() };
}

async function enqueue(body: { agent: string; input: string; thread_id?: string }): Promise<string> {
  const response = await fetch(`${serve.url}/v1/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return ((await response.json()) as { run_id: string }).run_id;
}

async function get<T>(path: string): Promise<T> {
  return (await (await fetch(`${serve.url}${path}`, { headers: { authorization: `Bearer ${KEYS.admin}` } })).json()) as T;
}

async function ended(run_id: string): Promise<void> {
  for (let tries = 0; tries < 300; tries += 1) {
    if (['completed', 'failed', 'cancelled'].includes((await get<{ status: string }>(`/v1/runs/${run_id}`)).status)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`run ${run_id} did not end`);
}

/** A bar's left and right edge, in the SVG's own units. */
const extent = (rects: { x: string | null; width: string | null }[]) => rects.map((rect) => [Number(rect.x), Number(rect.x) + Number(rect.width)] as const);

describe('the console draws runs, workflows and the fleet, in a real Chromium', () => {
  it("draws a run's eight parallel tool calls as eight overlapping bars on one time axis, above the events", async () => {
    const { page, violations, close } = await signedIn();
    const run_id = await enqueue({ agent: 'fan_agent', input: 'wait=600' });
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 15_000 });
    const section = page.locator('[data-section="timeline"]');
    const tools = section.locator('rect.bar[data-kind="tool"][data-outcome="completed"]');
    await page.waitForFunction(() => document.querySelectorAll('[data-section="timeline"] rect.bar[data-kind="tool"][data-outcome="completed"]').length === 8);
    const bars = extent(await tools.evaluateAll((rects) => rects.map((rect) => ({ x: rect.getAttribute('x'), width: rect.getAttribute('width') }))));
    expect(bars).toHaveLength(8);
    // Every pair overlaps: the latest start is before the earliest end.
    expect(Math.max(...bars.map(([start]) => start))).toBeLessThan(Math.min(...bars.map(([, end]) => end)));
    // Each is at least the 600 ms its call waited, on an axis the whole run long.
    const providers = extent(
      await section.locator('rect.bar[data-kind="provider"]').evaluateAll((rects) => rects.map((rect) => ({ x: rect.getAttribute('x'), width: rect.getAttribute('width') }))),
    );
    expect(providers).toHaveLength(2);
    // The calls ran after the first model call and before the second.
    expect(Math.min(...bars.map(([start]) => start))).toBeGreaterThanOrEqual(providers[0]![1] - 1);
    expect(Math.max(...bars.map(([, end]) => end))).toBeLessThanOrEqual(providers[1]![0] + 1);
    const title = await tools.first().locator('title').textContent();
    const [, amount, unit] = /^fan_wait · ([\d.]+) (ms|s) · completed$/.exec(title ?? '') ?? [];
    expect(Number(amount) * (unit === 's' ? 1_000 : 1)).toBeGreaterThanOrEqual(600);
    // The events table stays, below the timeline.
    const events = page.locator('tr[data-seq]').filter({ hasText: 'RunCompleted' });
    await events.waitFor();
    expect((await section.boundingBox())!.y).toBeLessThan((await events.boundingBox())!.y);
    await section.screenshot({ path: `${SCREENSHOTS}console-timeline.png` });
    expect(violations).toEqual([]);
    await close();
  });

  it('draws a workflow run as a graph: a box per step in its status colour, an edge per dependency', async () => {
    const { page, violations, close } = await signedIn();
    const run_id = await enqueue({ agent: 'diamond', input: 'go' });
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    const graph = page.locator('svg.workflow');
    await graph.locator('g.node[data-step="publish"][data-status="completed"]').waitFor({ timeout: 15_000 });
    const { agents } = await get<{ agents: { name: string; steps?: { id: string; depends_on: string[] }[] }[] }>('/v1/agents');
    const steps = agents.find((agent) => agent.name === 'diamond')!.steps!;
    const dependencies = steps.flatMap((step) => step.depends_on.map((dependency) => `${dependency}->${step.id}`));
    expect(dependencies).toHaveLength(4);
    expect((await graph.locator('path.edge').evaluateAll((paths) => paths.map((path) => path.getAttribute('data-edge')))).sort()).toEqual(dependencies.sort());
    expect(await graph.locator('g.node').count()).toBe(4);
    expect(await graph.locator('g.node.completed').count()).toBe(4);
    // Layers left to right: fetch, then summarise and translate side by side, then publish.
    const x = async (step: string) => (await graph.locator(`g.node[data-step="${step}"]`).boundingBox())!.x;
    expect(await x('fetch')).toBeLessThan(await x('summarise'));
    expect(await x('summarise')).toBe(await x('translate'));
    expect(await x('translate')).toBeLessThan(await x('publish'));
    // Each step is a row of the timeline too.
    await page.locator('[data-section="timeline"] rect.bar[data-kind="step"]').nth(3).waitFor();
    expect(await page.locator('[data-section="timeline"] rect.bar[data-kind="step"][data-outcome="completed"]').count()).toBe(4);
    await page.locator('.card', { has: graph }).screenshot({ path: `${SCREENSHOTS}console-graph.png` });
    expect(violations).toEqual([]);
    await close();
  });

  it('charts the overview from a batch of runs: runs per minute by status, durations, tokens per agent, queue depths', async () => {
    const runs = await Promise.all([
      ...Array.from({ length: 8 }, (_, at) => enqueue({ agent: 'fan_agent', input: `wait=${30 + at * 20}` })),
      ...Array.from({ length: 4 }, (_, at) => enqueue({ agent: 'chat_agent', input: `what is the sea${at}` })),
    ]);
    await Promise.all(runs.map(ended));
    const { page, violations, close } = await signedIn();
    await page.goto(`${serve.url}/#/overview`);
    const chart = (name: string) => page.locator(`svg[data-chart="${name}"]`);
    await chart('runs').locator('rect.bar[data-series="completed"]').first().waitFor();
    const overview = await get<{
      buckets: { completed: number; started: number }[];
      agents: { name: string; kind: string; tokens: { total: number } }[];
      duration_ms: { runs: number };
    }>('/v1/overview');
    const values = async (locator: ReturnType<Page['locator']>) => (await locator.evaluateAll((marks) => marks.map((mark) => Number(mark.getAttribute('data-value'))))) as number[];
    const sum = (numbers: number[]) => numbers.reduce((total, n) => total + n, 0);
    // Every run the API counted as completed is in a bar, and every started run on the line.
    const completed = sum(overview.buckets.map((bucket) => bucket.completed));
    expect(completed).toBeGreaterThanOrEqual(12);
    expect(sum(await values(chart('runs').locator('rect.bar[data-series="completed"]')))).toBe(completed);
    expect(sum(await values(chart('runs').locator('[data-series="started"] circle')))).toBe(sum(overview.buckets.map((bucket) => bucket.started)));
    // Durations: a p50 and a p95 point where runs ended.
    expect(await chart('duration').locator('[data-series="p50_ms"] circle').count()).toBeGreaterThan(0);
    expect(await chart('duration').locator('[data-series="p95_ms"] circle').count()).toBeGreaterThan(0);
    // Tokens per agent: a bar each, as long as the API says.
    for (const agent of overview.agents) {
      expect(await values(chart('tokens').locator(`g[data-row="${agent.kind}:${agent.name}"] rect`))).toEqual([agent.tokens.total]);
    }
    expect(overview.agents.map((agent) => `${agent.kind}:${agent.name}`).sort()).toEqual(['agent:chat_agent', 'agent:fan_agent', 'workflow:diamond']);
    // Queue depths: this minute's sample.
    expect(await chart('queues').count()).toBe(1);
    await page.locator('[data-section="totals"]').getByText(String(overview.duration_ms.runs)).first().waitFor();
    // The day's view: 96 buckets of 15 minutes, the same runs.
    await page.getByRole('button', { name: 'last day' }).click();
    await page.getByRole('heading', { name: 'Runs per 15 minutes' }).waitFor();
    await chart('runs').locator('rect.bar[data-series="completed"]').first().waitFor();
    expect(sum(await values(chart('runs').locator('rect.bar[data-series="completed"]')))).toBe(completed);
    // On a phone, the charts fit the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(0);
    expect(violations).toEqual([]);
    await close();
  });

  it('reads a thread as a conversation: the user’s bubbles on the right, the answers on the left, tool calls folded', async () => {
    const { page, violations, close } = await signedIn();
    const thread = `views-${prefix}`;
    const first = await enqueue({ agent: 'chat_agent', input: 'what is the sea', thread_id: thread });
    const second = await enqueue({ agent: 'chat_agent', input: 'and what is the ocean', thread_id: thread });
    await Promise.all([ended(first), ended(second)]);
    await page.goto(`${serve.url}/#/threads/${encodeURIComponent(thread)}`);
    await page.locator('.message.assistant', { hasText: 'The ocean is a large body of salt water.' }).waitFor({ timeout: 10_000 });
    const roles = await page.locator('.conversation .message').evaluateAll((messages) => messages.map((message) => message.className.replace('message ', '')));
    expect(roles).toEqual(['user', 'assistant', 'tool', 'assistant', 'user', 'assistant', 'tool', 'assistant']);
    const user = (await page.locator('.message.user').first().boundingBox())!;
    const answer = (await page.locator('.message.assistant').last().boundingBox())!;
    // The user's bubble sits on the right, the answer's on the left.
    expect(user.x + user.width).toBeGreaterThan(answer.x + answer.width);
    expect(user.x).toBeGreaterThan(answer.x);
    // A tool call is folded to its name; opened, it shows its arguments. Its result is folded under the tool's name.
    const call = page.locator('details[data-tool-call="look_sea"]');
    expect(await call.getAttribute('open')).toBeNull();
    expect(await call.locator('summary').textContent()).toBe('calls lookup');
    expect(await call.locator('p').isVisible()).toBe(false);
    await call.locator('summary').click();
    expect(await call.locator('p').textContent()).toBe('{"word":"sea"}');
    expect(await page.locator('.message.tool summary').first().textContent()).toBe('result of lookup');
    // Its runs, below.
    await page.locator(`tr[data-run="${second}"] .badge`, { hasText: 'completed' }).waitFor();
    await page.screenshot({ path: `${SCREENSHOTS}console-conversation.png`, fullPage: true });
    expect(violations).toEqual([]);
    await close();
  });

  it('offers cancel only to a key that may write, and the cancelled run’s open calls end on the timeline', async () => {
    const run_id = await enqueue({ agent: 'fan_agent', input: 'wait=20000' });
    const viewer = await signedIn('read');
    await viewer.page.goto(`${serve.url}/#/runs/${run_id}`);
    await viewer.page.locator('[data-section="timeline"] rect.bar[data-kind="tool"][data-outcome="running"]').nth(7).waitFor({ timeout: 15_000 });
    expect(await viewer.page.getByRole('button', { name: 'Cancel run' }).count()).toBe(0);
    await viewer.close();

    const { page, close } = await signedIn('admin');
    await page.goto(`${serve.url}/#/runs/${run_id}`);
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await page.locator('.facts .badge', { hasText: 'cancelled' }).waitFor({ timeout: 15_000 });
    await page.locator('[data-section="timeline"] rect.bar[data-kind="tool"][data-outcome="cancelled"]').nth(7).waitFor({ timeout: 15_000 });
    expect(await page.getByRole('button', { name: 'Cancel run' }).count()).toBe(0);
    await close();
  });
});
