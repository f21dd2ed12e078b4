import { describe, expect, it } from 'vitest';
import { runChaos } from './chaos/chaos.ts';

describe('chaos (short; `npm run chaos` runs the long one)', () => {
  it('ends every run with nothing written twice, nothing re-run after it was recorded, and no call failed by the engine, while workers and Redis are killed', async () => {
    const report = await runChaos({ runs: 150, workers: 2, killEveryMs: 3_000, redisKillsAtMs: [1_200], timeoutMs: 90_000, watchdogMs: 5_000 });
    expect(report.violations).toEqual([]);
    expect(report.completed).toBe(150);
    expect(report.workerKills).toBeGreaterThanOrEqual(1);
    expect(report.redisKills).toBe(1);
  }, 150_000);
});
