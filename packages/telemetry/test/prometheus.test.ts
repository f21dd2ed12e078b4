import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@arcflow/queue';
import { type FakeOpenAIServer, TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METERED_FIXTURE, freePort, meteredEnv, startMeteredModel } from './metrics-harness.ts';

// Debian's `prometheus` package (CI's .ci/run installs it); ARCFLOW_PROMETHEUS_BIN names another binary.
const PROMETHEUS = process.env.ARCFLOW_PROMETHEUS_BIN ?? 'prometheus';
const RUNS = 3;
const prefix = testPrefix('prometheus');
const CANARY = `CANARY_${Math.random().toString(36).slice(2, 10)}`;

let model: FakeOpenAIServer;
let worker: WorkerProcess | undefined;
let prometheus: ChildProcess | undefined;
let prometheusLog = '';
let dataDir: string;
let api: string;

/** One instant PromQL query over the HTTP API: the first result's value, or undefined when there is none yet. */
async function query(promql: string): Promise<number | undefined> {
  const response = await fetch(`${api}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await response.json()) as { status: string; data?: { result: { value: [number, string] }[] }; error?: string };
  if (body.status !== 'success') throw new Error(`PromQL ${promql} failed: ${body.error}`);
  const first = body.data?.result[0];
  return first ? Number(first.value[1]) : undefined;
}

beforeAll(async () => {
  const found = spawnSync(PROMETHEUS, ['--version'], { encoding: 'utf8' });
  if (found.error || found.status !== 0) {
    throw new Error(
      `this test needs a Prometheus server binary: '${PROMETHEUS}' could not run (${found.error?.message ?? found.stderr}). Install Debian's package (apt-get install prometheus; .ci/run does) or set ARCFLOW_PROMETHEUS_BIN.`,
    );
  }
  model = await startMeteredModel(CANARY);
  const metricsPort = await freePort();
  worker = await spawnWorker(METERED_FIXTURE, { args: ['--metrics-port', String(metricsPort)], env: meteredEnv(model, TEST_REDIS_URL, prefix, CANARY) });
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  const runIds: string[] = [];
  for (let n = 0; n < RUNS; n += 1) runIds.push((await client.enqueue({ agent: 'metered_agent', input: `run ${n}` })).run_id);
  for (const run_id of runIds) expect((await client.wait(run_id, { timeout_ms: 30_000 })).status).toBe('completed');
  await client.close();

  dataDir = mkdtempSync(join(tmpdir(), 'arcflow-prometheus-'));
  const config = join(dataDir, 'prometheus.yml');
  writeFileSync(
    config,
    ['global:', '  scrape_interval: 1s', 'scrape_configs:', '  - job_name: arcflow-workers', '    static_configs:', `      - targets: ['127.0.0.1:${metricsPort}']`, ''].join('\n'),
  );
  const apiPort = await freePort();
  api = `http://127.0.0.1:${apiPort}`;
  prometheus = spawn(PROMETHEUS, [`--config.file=${config}`, `--storage.tsdb.path=${join(dataDir, 'data')}`, `--web.listen-address=127.0.0.1:${apiPort}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  prometheus.stdout!.on('data', (chunk: Buffer) => (prometheusLog += chunk.toString()));
  prometheus.stderr!.on('data', (chunk: Buffer) => (prometheusLog += chunk.toString()));
}, 90_000);

afterAll(async () => {
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((resolve) => prometheus!.once('exit', resolve));
    prometheus.kill('SIGTERM');
    await exited;
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  await worker?.stop();
  await model?.close();
  await cleanupPrefix(prefix);
});

describe('a real Prometheus scraping a worker', () => {
  it('answers a PromQL query for the run count with the runs the worker ran', async () => {
    const promql = 'sum(arcflow_runs_total{job="arcflow-workers",arcflow_agent="metered_agent",arcflow_status="completed"})';
    let value: number | undefined;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && value !== RUNS) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      value = await query(promql).catch(() => undefined);
    }
    expect(value, `Prometheus log:\n${prometheusLog.slice(-2000)}`).toBe(RUNS);
    // The scrape itself was healthy, and the gauges came through too.
    expect(await query('up{job="arcflow-workers"}')).toBe(1);
    expect(await query('max(arcflow_workers_live{arcflow_queue="agent-metered_agent"})')).toBe(1);
    expect(await query('sum(gen_ai_client_operation_duration_count{gen_ai_request_model="fake-model"})')).toBe(2 * RUNS);
  }, 40_000);
});
