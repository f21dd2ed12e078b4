import { readFileSync } from 'node:fs';
import { createClient } from '@arcflow/queue';
import {
  type FakeOpenAIServer,
  type OtlpReceiver,
  type PrometheusSample,
  TEST_REDIS_URL,
  cleanupPrefix,
  latestPoints,
  metricFamilies,
  parsePrometheusText,
  sampleSum,
  startOtlpReceiver,
  testPrefix,
} from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METERED_FIXTURE, USAGE, freePort, meteredEnv, startMeteredModel } from './metrics-harness.ts';

const RUNS = 4;
const CANARY = `CANARY_${Math.random().toString(36).slice(2, 10)}`;
const prefix = testPrefix('metrics');
const DASHBOARD = new URL('../../../infra/grafana/arcflow-dashboard.json', import.meta.url);
const SCALED_OBJECT = new URL('../../../infra/keda/worker-scaledobject.yaml', import.meta.url);

let model: FakeOpenAIServer;
let receiver: OtlpReceiver;
let worker: WorkerProcess | undefined;
let scraped: string;
let samples: PrometheusSample[];
let runIds: string[];
let queueNames: string[];
let exitCode: number | string;

beforeAll(async () => {
  model = await startMeteredModel(CANARY);
  receiver = await startOtlpReceiver();
  const port = await freePort();
  worker = await spawnWorker(METERED_FIXTURE, {
    args: ['--metrics-port', String(port)],
    env: { ...meteredEnv(model, TEST_REDIS_URL, prefix, CANARY), OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${receiver.url}/v1/metrics`, OTEL_METRIC_EXPORT_INTERVAL: '60000' },
  });
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  runIds = [];
  for (let n = 0; n < RUNS; n += 1) runIds.push((await client.enqueue({ agent: 'metered_agent', input: `${CANARY}-input-${n}` })).run_id);
  for (const run_id of runIds) expect((await client.wait(run_id, { timeout_ms: 30_000 })).status).toBe('completed');
  // Failures, on agents of their own models and tools, so the metered agent's counts stay exact.
  const flaky = await client.enqueue({ agent: 'flaky_agent', input: `${CANARY}-flaky` });
  const failing = await client.enqueue({ agent: 'failing_agent', input: `${CANARY}-failing` });
  runIds.push(flaky.run_id, failing.run_id);
  expect((await client.wait(flaky.run_id, { timeout_ms: 30_000 })).status).toBe('completed');
  expect((await client.wait(failing.run_id, { timeout_ms: 30_000 })).status).toBe('failed');
  queueNames = (await client.queues()).map((queue) => queue.name);
  await client.close();
  scraped = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  samples = parsePrometheusText(scraped);
  // SIGTERM: the worker drains, then its last OTLP export goes out (the interval alone would not send one in time).
  exitCode = await worker.stop();
  worker = undefined;
}, 90_000);

/** The queue of a tool's one definition: `tool-<name>-<definition hash>`. */
function toolQueue(name: string): string {
  const found = queueNames.filter((queue) => new RegExp(`^tool-${name}-[0-9a-f]{16}$`).test(queue));
  expect(found).toHaveLength(1);
  return found[0]!;
}

afterAll(async () => {
  await worker?.stop();
  await Promise.all([model?.close(), receiver?.close()]);
  await cleanupPrefix(prefix);
});

describe('a worker with --metrics-port, after N runs of one tool round each', () => {
  it('counts 2N provider calls, their tokens by type, N tool executions, N steps and N completed runs', () => {
    const chat = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'openai', gen_ai_request_model: 'fake-model' };
    expect(sampleSum(samples, 'gen_ai_client_operation_duration_count', chat)).toBe(2 * RUNS);
    // Streamed calls (SPEC §12): each gives a time to first chunk, a call that streams only a tool call too.
    expect(sampleSum(samples, 'gen_ai_client_operation_time_to_first_chunk_count', chat)).toBe(2 * RUNS);
    expect(sampleSum(samples, 'gen_ai_client_token_usage_sum', { ...chat, gen_ai_token_type: 'input' })).toBe(RUNS * (USAGE.toolCall.prompt_tokens + USAGE.answer.prompt_tokens));
    expect(sampleSum(samples, 'gen_ai_client_token_usage_sum', { ...chat, gen_ai_token_type: 'output' })).toBe(
      RUNS * (USAGE.toolCall.completion_tokens + USAGE.answer.completion_tokens),
    );
    expect(sampleSum(samples, 'gen_ai_execute_tool_duration_count', { gen_ai_tool_name: 'lookup' })).toBe(RUNS);
    expect(sampleSum(samples, 'gen_ai_invoke_agent_duration_count', { gen_ai_agent_name: 'metered_agent' })).toBe(RUNS);
    expect(sampleSum(samples, 'arcflow_runs_total', { arcflow_agent: 'metered_agent', arcflow_status: 'completed' })).toBe(RUNS);
    expect(sampleSum(samples, 'arcflow_run_duration_count', { arcflow_agent: 'metered_agent', arcflow_status: 'completed' })).toBe(RUNS);
  });

  it('names failures by their error codes', () => {
    expect(sampleSum(samples, 'gen_ai_execute_tool_duration_count', { gen_ai_tool_name: 'broken', error_type: 'tool_error' })).toBe(1);
    // The provider failure's own code on the call; the step fails as a provider error.
    expect(sampleSum(samples, 'gen_ai_client_operation_duration_count', { gen_ai_request_model: 'broken-model', error_type: 'bad_request' })).toBe(1);
    expect(sampleSum(samples, 'arcflow_runs_total', { arcflow_agent: 'failing_agent', arcflow_status: 'failed' })).toBe(1);
    expect(sampleSum(samples, 'gen_ai_invoke_agent_duration_count', { gen_ai_agent_name: 'failing_agent', error_type: 'provider_error' })).toBe(1);
  });

  it('times 2N provider job starts and N tool job starts', () => {
    expect(sampleSum(samples, 'arcflow_job_schedule_to_start_count', { arcflow_queue: 'agent-metered_agent', arcflow_job_kind: 'provider' })).toBe(2 * RUNS);
    expect(sampleSum(samples, 'arcflow_job_schedule_to_start_count', { arcflow_queue: toolQueue('lookup'), arcflow_job_kind: 'tool' })).toBe(RUNS);
  });

  it('reports queue depth by state and live workers for each of its queues', () => {
    for (const queue of ['agent-metered_agent', toolQueue('lookup'), 'agent-failing_agent', toolQueue('broken')]) {
      for (const state of ['waiting', 'active', 'delayed']) {
        expect(
          samples.filter((sample) => sample.name === 'arcflow_queue_depth' && sample.labels.arcflow_queue === queue && sample.labels.arcflow_job_state === state),
        ).toHaveLength(1);
      }
      expect(sampleSum(samples, 'arcflow_workers_live', { arcflow_queue: queue })).toBe(1);
    }
  });

  it('holds no run id and no content', () => {
    expect(scraped).not.toContain(CANARY);
    for (const run_id of runIds) expect(scraped).not.toContain(run_id);
  });

  it('carries only the attributes SPEC §18 lists', () => {
    const allowed = new Set([
      'gen_ai_operation_name',
      'gen_ai_provider_name',
      'gen_ai_request_model',
      'gen_ai_token_type',
      'gen_ai_tool_name',
      'gen_ai_agent_name',
      'error_type',
      'arcflow_agent',
      'arcflow_workflow',
      'arcflow_status',
      'arcflow_queue',
      'arcflow_job_kind',
      'arcflow_job_state',
      'arcflow_tenant',
      'le',
    ]);
    const arcflow = samples.filter((sample) => sample.name.startsWith('gen_ai_') || sample.name.startsWith('arcflow_'));
    expect(arcflow.length).toBeGreaterThan(0);
    // otel_scope_* name the meter (`arcflow`), as the exporter adds them to every series.
    for (const sample of arcflow)
      for (const label of Object.keys(sample.labels)) if (!label.startsWith('otel_scope_')) expect(allowed, `${sample.name} has label ${label}`).toContain(label);
  });
});

describe('the same worker over OTLP/HTTP', () => {
  it('exported the same counts on shutdown, with no run id or content', () => {
    expect(exitCode).toBe(0);
    const metricBodies = receiver.bodies.filter((entry) => entry.path === '/v1/metrics');
    expect(metricBodies.length).toBeGreaterThan(0);
    for (const { body } of metricBodies) {
      expect(body).not.toContain(CANARY);
      for (const run_id of runIds) expect(body).not.toContain(run_id);
    }
    const points = latestPoints(receiver);
    const count = (metric: string, attributes: Record<string, string> = {}) =>
      points
        .filter((point) => point.metric === metric && Object.entries(attributes).every(([key, value]) => point.attributes[key] === value))
        .reduce((total, point) => total + (point.count ?? point.value ?? 0), 0);
    const sum = (metric: string, attributes: Record<string, string>) =>
      points
        .filter((point) => point.metric === metric && Object.entries(attributes).every(([key, value]) => point.attributes[key] === value))
        .reduce((total, point) => total + (point.sum ?? 0), 0);
    expect(count('gen_ai.client.operation.duration', { 'gen_ai.request.model': 'fake-model' })).toBe(2 * RUNS);
    expect(sum('gen_ai.client.token.usage', { 'gen_ai.request.model': 'fake-model', 'gen_ai.token.type': 'input' })).toBe(
      RUNS * (USAGE.toolCall.prompt_tokens + USAGE.answer.prompt_tokens),
    );
    expect(count('gen_ai.execute_tool.duration', { 'gen_ai.tool.name': 'lookup' })).toBe(RUNS);
    expect(count('gen_ai.invoke_agent.duration', { 'gen_ai.agent.name': 'metered_agent' })).toBe(RUNS);
    expect(count('arcflow.runs', { 'arcflow.agent': 'metered_agent', 'arcflow.status': 'completed' })).toBe(RUNS);
    expect(count('arcflow.job.schedule_to_start', { 'arcflow.queue': 'agent-metered_agent', 'arcflow.job.kind': 'provider' })).toBe(2 * RUNS);
    expect(count('arcflow.job.schedule_to_start', { 'arcflow.queue': toolQueue('lookup'), 'arcflow.job.kind': 'tool' })).toBe(RUNS);
    expect(points.some((point) => point.metric === 'arcflow.queue.depth')).toBe(true);
    expect(points.some((point) => point.metric === 'arcflow.workers.live')).toBe(true);
  });
});

describe('the Grafana dashboard and the KEDA ScaledObject', () => {
  it('query only metrics the code emits, as a scrape names them', () => {
    const emitted = new Set<string>();
    for (const [family, type] of metricFamilies(scraped)) {
      emitted.add(family);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) emitted.add(family + suffix);
    }
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })));
    expect(exprs.length).toBeGreaterThan(5);
    const triggers = [...readFileSync(SCALED_OBJECT, 'utf8').matchAll(/^\s+query: (.+)$/gm)].map((match) => ({ panel: 'KEDA trigger', expr: match[1]! }));
    expect(triggers).toHaveLength(2);
    exprs.push(...triggers);
    // Labels a query may name: those the scrape's series carry, and what Prometheus adds (job, instance) or histograms have (le).
    const labels = new Set(['job', 'instance', 'le', ...samples.flatMap((sample) => Object.keys(sample.labels))]);
    for (const { panel, expr } of exprs) {
      const grouped = [...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap((match) => match[1]!.split(',').map((label) => label.trim()));
      const matched = [...expr.matchAll(/\{([^}]*)\}/g)].flatMap((match) => [...match[1]!.matchAll(/([a-z_]+)\s*(?:=~|!~|!=|=)/g)].map((label) => label[1]!));
      for (const label of [...grouped, ...matched]) expect(labels, `panel '${panel}' uses label ${label}, which no series carries`).toContain(label);
      const bare = expr.replace(/\{[^}]*\}/g, '').replace(/\b(?:by|without)\s*\([^)]*\)/g, '');
      const names = [...bare.matchAll(/\b((?:gen_ai|arcflow)_[a-z0-9_]+)/g)].map((match) => match[1]!);
      expect(names.length, `panel '${panel}' queries no arcflow metric: ${expr}`).toBeGreaterThan(0);
      for (const name of names) expect(emitted, `panel '${panel}' queries ${name}, which no scrape holds`).toContain(name);
    }
  });
});
