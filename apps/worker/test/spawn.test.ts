import { spawn } from 'node:child_process';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { afterAll, describe, expect, it } from 'vitest';

const EXAMPLE = new URL('../../../examples/weather-agent.ts', import.meta.url).pathname;
const PARENT = new URL('./fixtures/spawning-parent.ts', import.meta.url).pathname;
const prefix = testPrefix('spawn');

afterAll(() => cleanupPrefix(prefix, TEST_REDIS_URL));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a worker started by spawnWorker', () => {
  it('drains and exits when the process that started it is killed', async () => {
    const env = { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
    const parent = spawn(process.execPath, ['--import', 'tsx', PARENT, EXAMPLE], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    const workerPid = await new Promise<number>((resolve, reject) => {
      let out = '';
      parent.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const match = /worker pid (\d+)/.exec(out);
        if (match) resolve(Number(match[1]));
      });
      parent.once('exit', (code) => reject(new Error(`the parent exited (${code}) before its worker was ready`)));
    });
    try {
      expect(alive(workerPid)).toBe(true);
      parent.kill('SIGKILL');
      const deadline = Date.now() + 15_000;
      while (alive(workerPid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(alive(workerPid)).toBe(false);
    } finally {
      if (alive(workerPid)) process.kill(workerPid, 'SIGKILL');
    }
  }, 40_000);
});
