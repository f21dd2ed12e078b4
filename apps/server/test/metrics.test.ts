import { TEST_REDIS_URL, cleanupPrefix, parsePrometheusText, sampleSum, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, spawnServe } from './harness.ts';

const FIXTURE = new URL('./fixtures/api-agents.ts', import.meta.url).pathname;
const prefix = testPrefix('serve-metrics');
const KEYS = { read: 'read-secret-metrics-0123', write: 'write-secret-metrics-0123' };
const base = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
let keyed: ServeProcess;
let open: ServeProcess;
let worker: WorkerProcess;
const runIds: string[] = [];

const post = (path: string, body?: unknown) =>
  fetch(`${keyed.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.write}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  }).then((response) => response.json() as Promise<Record<string, any>>);

async function waitFor(run_id: string, status: string): Promise<void> {
  for (let tries = 0; tries < 200; tries += 1) {
    const record = (await (await fetch(`${keyed.url}/v1/runs/${run_id}`, { headers: { authorization: `Bearer ${KEYS.read}` } })).json()) as { status: string };
    if (record.status === status) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`run ${run_id} did not reach ${status}`);
}

beforeAll(async () => {
  [keyed, open, worker] = await Promise.all([
    spawnServe({ ...base, ARCFLOW_API_KEYS: `viewer:${KEYS.read}:read,backend:${KEYS.write}:write` }),
    spawnServe(base),
    spawnWorker(FIXTURE, { env: base }),
  ]);
  for (const input of ['wait=10 one', 'wait=10 two']) runIds.push((await post('/v1/runs', { agent: 'api_agent', input })).run_id);
  for (const run_id of runIds) await waitFor(run_id, 'completed');
  // Cancelled by the API, not by a worker: the deployment's count has it all the same.
  const waiting = (await post('/v1/runs', { agent: 'api_approver', input: 'refund order 7' })).run_id as string;
  runIds.push(waiting);
  await waitFor(waiting, 'waiting');
  await post(`/v1/runs/${waiting}/cancel`);
}, 60_000);

afterAll(async () => {
  await Promise.all([keyed?.stop(), open?.stop(), worker?.stop()]);
  await cleanupPrefix(prefix);
});

describe('arcflow serve GET /metrics', () => {
  it('needs a key when keys are set (scope read), and serves the deployment-wide run counters and queue gauges', async () => {
    expect((await fetch(`${keyed.url}/metrics`)).status).toBe(401);
    const response = await fetch(`${keyed.url}/metrics`, { headers: { authorization: `Bearer ${KEYS.read}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    const samples = parsePrometheusText(text);
    expect(sampleSum(samples, 'arcflow_runs_total', { arcflow_agent: 'api_agent', arcflow_status: 'completed' })).toBe(2);
    expect(sampleSum(samples, 'arcflow_runs_total', { arcflow_agent: 'api_approver', arcflow_status: 'cancelled' })).toBe(1);
    // A tool's queue is its definition's: `tool-<name>-<definition hash>`.
    const toolQueue = (name: string) =>
      samples.find((sample) => new RegExp(`^tool-${name}-[0-9a-f]{16}$`).test(sample.labels.arcflow_queue ?? ''))?.labels.arcflow_queue ?? `tool-${name}`;
    for (const queue of ['agent-api_agent', 'agent-api_approver', 'agent-api_flow', toolQueue('api_pause'), toolQueue('api_refund')]) {
      expect(samples.filter((sample) => sample.name === 'arcflow_queue_depth' && sample.labels.arcflow_queue === queue)).toHaveLength(3);
      expect(sampleSum(samples, 'arcflow_workers_live', { arcflow_queue: queue })).toBe(1);
    }
    // The server runs no jobs: none of the workers' own histograms, and no run id.
    expect(samples.some((sample) => sample.name.startsWith('gen_ai_'))).toBe(false);
    for (const run_id of runIds) expect(text).not.toContain(run_id);
  });

  it('answers without a key on a server with no keys (loopback only)', async () => {
    const response = await fetch(`${open.url}/metrics`);
    expect(response.status).toBe(200);
    expect(sampleSum(parsePrometheusText(await response.text()), 'arcflow_runs_total', { arcflow_agent: 'api_agent' })).toBe(2);
  });
});
