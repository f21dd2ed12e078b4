import { TEST_REDIS_URL, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEAP_GROWING_PERCENT, heapGrowingPercent } from '../src/heap.ts';
import { spawnWorker } from '../src/spawn.ts';

const EXAMPLE = new URL('../../../examples/weather-agent.ts', import.meta.url).pathname;

describe('the worker heap bound', () => {
  it('reads ARCFLOW_HEAP_GROWING_PERCENT: unset means the default, 0 means V8 sizing, anything else must be an integer to 1000', () => {
    expect(heapGrowingPercent(undefined)).toBe(DEFAULT_HEAP_GROWING_PERCENT);
    expect(heapGrowingPercent('')).toBe(DEFAULT_HEAP_GROWING_PERCENT);
    expect(heapGrowingPercent('0')).toBe(0);
    expect(heapGrowingPercent('120')).toBe(120);
    for (const bad of ['abc', '-1', '1.5', '1001']) {
      expect(() => heapGrowingPercent(bad)).toThrow(`ARCFLOW_HEAP_GROWING_PERCENT must be an integer from 0 to 1000 (0: V8's own sizing), got '${bad}'`);
    }
  });

  it('a worker process refuses a bad value before it connects to anything, and exits 1', async () => {
    const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: testPrefix('heap'), OPENAI_API_KEY: '', OPENAI_BASE_URL: '', ARCFLOW_HEAP_GROWING_PERCENT: 'lots' };
    await expect(spawnWorker(EXAMPLE, { env })).rejects.toThrow(/worker exited \(1\) before it was ready[\s\S]*ARCFLOW_HEAP_GROWING_PERCENT must be an integer/);
  });
});
