// `npx tsx scripts/console-screenshots.ts [minutes]`: the overview's screenshot (docs/images/console-overview.png)
// over a few minutes of real runs. A worker and `arcflow serve` run in this process on a fresh
// prefix (Redis at REDIS_URL) with three agents and a scripted model: some runs complete, some fail
// (the model refuses them), some are cancelled while their calls wait; the rate of enqueues rises and
// falls from minute to minute. Then a headless Chromium (CHROMIUM_PATH, default /usr/bin/chromium)
// screenshots the overview. The browser tests take the other pages' screenshots.
import { silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { startServer } from '@arcflow/server';
import { cleanupPrefix } from '@arcflow/testing';
import { Agent, type ModelProvider, ProviderFailure, type ProviderResponse, tool } from 'arcflow';
import { chromium } from 'playwright-core';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const MINUTES = Number(process.argv[2] ?? 6);
const OUT = new URL('../docs/images/console-overview.png', import.meta.url).pathname;

const lookup = tool({
  name: 'lookup_order',
  description: 'Looks an order up',
  input_schema: { type: 'object', properties: { ms: { type: 'integer' } } },
  handler: async ({ ms }: { ms?: number }, ctx) => {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms ?? 200);
      ctx.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()));
    });
    return 'shipped';
  },
});
const agents = [new Agent({ name: 'support', tools: [lookup] }), new Agent({ name: 'researcher', tools: [lookup], loop_detection: false }), new Agent({ name: 'summariser' })];

/** `support` looks one order up, `researcher` three at once, `summariser` answers at once; an input with `refuse` fails. */
const provider: ModelProvider = {
  id: 'screenshots',
  defaultModel: 'scripted',
  async complete(request): Promise<ProviderResponse> {
    const input = String(request.messages.find((message) => message.role === 'user')?.content ?? '');
    if (input.includes('refuse')) throw new ProviderFailure('bad_request', 'the scripted model refuses this input', { status: 400, retryable: false });
    const usage = { input: 300 + input.length * 7, output: 60 + (input.length % 40), total: 360 + input.length * 7 + (input.length % 40) };
    const ms = Number(/ms=(\d+)/.exec(input)?.[1] ?? 200);
    if (request.messages.at(-1)?.role === 'tool' || request.tools.length === 0) return { content: `answered: ${input}`, tool_calls: [], finish_reason: 'stop', usage };
    const calls = request.tools.length > 0 && input.startsWith('research') ? 3 : 1;
    return {
      content: null,
      finish_reason: 'tool_calls',
      usage,
      tool_calls: Array.from({ length: calls }, (_, at) => ({ id: `c${at}`, type: 'function' as const, function: { name: 'lookup_order', arguments: JSON.stringify({ ms }) } })),
    };
  },
};

const prefix = `screenshots-${process.pid}`;
const worker = await startWorker({ agents, provider, redis: REDIS_URL, prefix, logger: silentLogger });
const server = await startServer({ redis: REDIS_URL, prefix, port: 0, log: false });
const client = createClient({ redis: REDIS_URL, prefix });
try {
  const end = Date.now() + MINUTES * 60_000;
  for (let tick = 0; Date.now() < end; tick += 1) {
    // Enqueues every 5 s, more at some minutes than others.
    const count = 2 + Math.round(3 * (1 + Math.sin(tick / 5)));
    for (let n = 0; n < count; n += 1) {
      const kind = (tick + n) % 7;
      const ms = 100 + ((tick * 37 + n * 53) % 900);
      if (kind === 0) await client.enqueue({ agent: 'summariser', input: `refuse summary ${tick}` });
      else if (kind < 3) await client.enqueue({ agent: 'researcher', input: `research topic ${tick}-${n} ms=${ms * 2}` });
      else if (kind === 3 && n % 2 === 0) {
        const { run_id } = await client.enqueue({ agent: 'support', input: `order ${tick}-${n} ms=5000` });
        setTimeout(() => void client.cancel(run_id), 1_500);
      } else await client.enqueue({ agent: kind % 2 ? 'support' : 'summariser', input: `order ${tick}-${n} ms=${ms}` });
    }
    // As a console with the overview open does: the overview samples the queues' depths once a minute.
    await (await fetch(`${server.url}/v1/overview`)).arrayBuffer();
    process.stderr.write(`screenshots: ${Math.ceil((end - Date.now()) / 1000)} s to go\n`);
    await new Promise((resolve) => setTimeout(resolve, 5_000));
  }
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(`${server.url}/#/overview`);
    await page.locator('svg[data-chart="runs"] rect.bar').first().waitFor();
    await page.screenshot({ path: OUT, fullPage: true });
    process.stderr.write(`screenshots: wrote ${OUT}\n`);
  } finally {
    await browser.close();
  }
} finally {
  await client.close();
  await server.close();
  await worker.close();
  await cleanupPrefix(prefix, REDIS_URL);
}
