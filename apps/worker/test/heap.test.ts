import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEAP_GROWING_PERCENT, WORKER_NODE_FLAGS, heapGrowingPercent } from '../src/heap.ts';
import { ARCFLOW_BIN, spawnWorker } from '../src/spawn.ts';

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

describe('the worker young generation', () => {
  /** The Node flags a running process was started with, from its command line (Linux). */
  const nodeFlagsOf = (pid: number) =>
    readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      .split('\0')
      .filter((arg) => arg.startsWith('--max-semi-space-size'));

  it('the arcflow command carries the worker flags in its shebang', () => {
    const shebang = readFileSync(ARCFLOW_BIN, 'utf8').split('\n')[0];
    expect(shebang).toBe(`#!/usr/bin/env -S node ${WORKER_NODE_FLAGS.join(' ')}`);
  });

  it('a worker started by spawnWorker, or by running the arcflow command itself, runs with them', async () => {
    const prefix = testPrefix('young-gen');
    const env = { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
    const spawned = await spawnWorker(EXAMPLE, { env });
    // The command run as an executable, as npx runs it: the kernel reads the shebang.
    const direct = spawn(ARCFLOW_BIN, ['worker', '--module', EXAMPLE], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((ready) => direct.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes(' ready: ') && ready()));
      expect(nodeFlagsOf(spawned.pid)).toEqual(WORKER_NODE_FLAGS);
      expect(nodeFlagsOf(direct.pid!)).toEqual(WORKER_NODE_FLAGS);
    } finally {
      await spawned.stop();
      const exited = new Promise((done) => direct.once('exit', done));
      direct.kill('SIGTERM');
      await exited;
      await cleanupPrefix(prefix, TEST_REDIS_URL);
    }
  });
});
