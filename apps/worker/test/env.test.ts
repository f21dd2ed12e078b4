import { ConfigError } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { readWorkerEnv } from '../src/env.ts';

describe('the worker environment', () => {
  it('reads ARCFLOW_SERVE_PARTITIONS as numbers and ranges', () => {
    expect(readWorkerEnv({ ARCFLOW_SERVE_PARTITIONS: '0-3, 8,10-11' }).servePartitions).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(readWorkerEnv({ ARCFLOW_SERVE_PARTITIONS: '' }).servePartitions).toBeUndefined();
    expect(readWorkerEnv({}).servePartitions).toBeUndefined();
  });

  it('refuses a partition list it cannot read, naming the variable', () => {
    for (const value of ['a', '3-1', '0-1024', '1,,2', '-1']) {
      expect(() => readWorkerEnv({ ARCFLOW_SERVE_PARTITIONS: value })).toThrow(ConfigError);
    }
    expect(() => readWorkerEnv({ ARCFLOW_SERVE_PARTITIONS: '0-x' })).toThrow(
      'ARCFLOW_SERVE_PARTITIONS must list partition numbers or ranges from 0 to 1023, like 0-7 or 0,2,4-5; got "0-x"',
    );
  });

  it('names the unit only where there is one', () => {
    expect(() => readWorkerEnv({ ARCFLOW_PARTITIONS: 'four' })).toThrow('ARCFLOW_PARTITIONS must be a whole number >= 1, got "four"');
    expect(() => readWorkerEnv({ ARCFLOW_PARTITIONS: '12' })).toThrow('ARCFLOW_PARTITIONS must be a power of two from 1 to 1024 (1, 2, 4, … 1024), got "12"');
    expect(() => readWorkerEnv({ ARCFLOW_PARTITIONS: '2048' })).toThrow(ConfigError);
    expect(readWorkerEnv({ ARCFLOW_PARTITIONS: '16' }).partitions).toBe(16);
    expect(() => readWorkerEnv({ ARCFLOW_WATCHDOG_MS: '0' })).toThrow('ARCFLOW_WATCHDOG_MS must be a whole number of milliseconds >= 1, got "0"');
    expect(readWorkerEnv({ ARCFLOW_MAX_STALLED_COUNT: '5' }).maxStalledCount).toBe(5);
    expect(readWorkerEnv({}).maxStalledCount).toBeUndefined();
    expect(() => readWorkerEnv({ ARCFLOW_MAX_STALLED_COUNT: 'lots' })).toThrow('ARCFLOW_MAX_STALLED_COUNT must be a whole number >= 1, got "lots"');
  });
});
