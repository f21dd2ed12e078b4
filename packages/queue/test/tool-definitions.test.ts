import { createClient } from '@arcflow/queue';
import { spawnWorker } from '@arcflow/worker';
import { describe, expect, it } from 'vitest';
import { fixtureWorkers } from './harness.ts';

// SPEC §5: two tools are the same tool only if their definitions are. Two `arcflow worker`
// processes, from two modules that each define a `get_weather` (different schemas and handlers),
// on one prefix: each run's call is answered by its own module's handler, and the worker that
// starts second says which live worker holds the other definition.

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url).pathname;
const { forTest } = fixtureWorkers(fixture('clash-a.ts'));

describe('tools of one name with different definitions', () => {
  it('runs each call on a handler of the definition it was planned with (50 runs, none crossed), and warns at start', async () => {
    const workers = forTest('tool-clash');
    const first = await workers.start();
    const second = await spawnWorker(fixture('clash-b.ts'), { env: { REDIS_URL: workers.url, ARCFLOW_PREFIX: workers.prefix } });
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const warning = second
        .stderr()
        .split('\n')
        .filter((line) => line.includes('"level":"warn"'))
        .map((line) => JSON.parse(line) as { message: string; tool: string; other_workers: string[] });
      expect(warning).toEqual([
        expect.objectContaining({
          message: expect.stringContaining("another live worker on this prefix defines tool 'get_weather' differently"),
          tool: 'get_weather',
          other_workers: [expect.stringContaining(first.id)],
        }),
      ]);
      expect(first.stderr()).not.toContain('"level":"warn"');

      const agents = Array.from({ length: 50 }, (_, n) => (n % 2 === 0 ? 'weather_a' : 'weather_b'));
      const runs = await Promise.all(agents.map(async (agent) => ({ agent, run_id: (await client.enqueue({ agent, input: 'Weather in Oslo?' })).run_id })));
      const outputs = await Promise.all(runs.map(async ({ agent, run_id }) => ({ agent, run: await client.wait(run_id, { timeout_ms: 30_000 }) })));
      const answeredBy = (side: string) => `weather from module ${side}`;
      expect(outputs.filter(({ agent, run }) => run.status !== 'completed' || run.output !== answeredBy(agent.slice(-1)))).toEqual([]);
    } finally {
      await client.close();
      second.kill('SIGKILL');
    }
  }, 90_000);
});
