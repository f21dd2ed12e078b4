import { execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

/** The processes descended from `root` (children, theirs, …), with their command lines. */
function descendants(root: number): { pid: number; args: string }[] {
  const table = execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' })
    .split('\n')
    .flatMap((line) => {
      const match = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
      return match ? [{ pid: Number(match[1]), ppid: Number(match[2]), args: match[3]! }] : [];
    });
  const found: { pid: number; args: string }[] = [];
  const parents = [root];
  while (parents.length > 0) {
    const parent = parents.pop()!;
    for (const row of table.filter((candidate) => candidate.ppid === parent)) {
      found.push({ pid: row.pid, args: row.args });
      parents.push(row.pid);
    }
  }
  return found;
}

describe('a worker started with npx', () => {
  it('drains and exits when `npx arcflow worker` is stopped (npm exits without passing the signal on)', async () => {
    const root = new URL('../../../', import.meta.url).pathname;
    const env = { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
    // The worker's log goes to a file: it outlives npm, whose pipes would go with it.
    const log = join(mkdtempSync(join(tmpdir(), 'arcflow-npx-')), 'worker.log');
    const logFd = openSync(log, 'w');
    const npx = spawn('npx', ['--no-install', 'arcflow', 'worker', '--module', EXAMPLE], { cwd: root, env, stdio: ['ignore', 'pipe', logFd] });
    closeSync(logFd);
    const stderr = () => readFileSync(log, 'utf8');
    await new Promise<void>((resolve, reject) => {
      let out = '';
      npx.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (/arcflow worker \S+ ready/.test(out)) resolve();
      });
      npx.once('exit', (code) => reject(new Error(`npx exited (${code}) before its worker was ready: ${stderr()}`)));
    });
    // The node process itself (npm starts it through a shell, whose command line names the worker too).
    const worker = descendants(npx.pid!).find(({ args }) => /(^|\/)node$/.test(args.split(' ')[0]!) && args.includes('worker --module'));
    expect(worker).toBeDefined();
    try {
      npx.kill('SIGTERM');
      const deadline = Date.now() + 30_000;
      while (alive(worker!.pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(alive(worker!.pid)).toBe(false);
      expect(stderr()).toContain('parent process gone, draining in-flight jobs');
    } finally {
      if (alive(worker!.pid)) process.kill(worker!.pid, 'SIGKILL');
    }
  }, 120_000);
});
