import { createClient, keysFor } from '@arcflow/queue';
import { type OtlpReceiver, type ReceivedSpan, TEST_REDIS_URL, cleanupPrefix, startOtlpReceiver, testPrefix } from '@arcflow/testing';
import { spawnWorker } from '@arcflow/worker';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// SPEC §13: a child run's spans are in its parent's trace, under the `execute_tool` span of the
// call that started it.

const FIXTURE = new URL('../../queue/test/fixtures/child-agents.ts', import.meta.url).pathname;
const CANARY = `CANARY_${Math.random().toString(36).slice(2, 10)}`;
const prefix = testPrefix('child-tracing');

let receiver: OtlpReceiver;
let spans: ReceivedSpan[];
let parent: { run_id: string; traceId: string; rootSpanId: string };
let child_run_id: string;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'arcflow-child-tracing' };
  const workers = await Promise.all([spawnWorker(FIXTURE, { env }), spawnWorker(FIXTURE, { env })]);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  const { run_id } = await client.enqueue({ agent: 'coordinator', input: `ask:${CANARY}` });
  expect((await client.wait(run_id, { timeout_ms: 30_000 })).status).toBe('completed');
  child_run_id = (await client.list({ agent: 'researcher', limit: 1 })).runs[0]!.run_id;
  await client.close();
  const redis = new Redis(TEST_REDIS_URL);
  const [, traceId, rootSpanId] = JSON.parse((await redis.hget(keysFor(prefix).run(run_id).record, 'trace'))!).traceparent.split('-');
  await redis.quit();
  parent = { run_id, traceId, rootSpanId };
  await Promise.all(workers.map((worker) => worker.stop()));
  spans = receiver.spans();
}, 60_000);

afterAll(async () => {
  await receiver?.close();
  await cleanupPrefix(prefix);
});

describe("a child run's spans", () => {
  it("are in the parent's trace, the child's root under the call's execute_tool span, itself under the parent's root", () => {
    expect(new Set(spans.map((span) => span.traceId))).toEqual(new Set([parent.traceId]));
    const call = spans.find((span) => span.name === 'execute_tool researcher')!;
    expect(call).toMatchObject({ parentSpanId: parent.rootSpanId });
    expect(call.attributes).toMatchObject({ 'gen_ai.tool.call.id': 'r1_0', 'arcflow.run_id': parent.run_id, 'arcflow.child_run_id': child_run_id });
    const childRoot = spans.find((span) => span.name === 'invoke_agent researcher')!;
    expect(childRoot).toMatchObject({ parentSpanId: call.spanId });
    expect(childRoot.attributes['arcflow.run_id']).toBe(child_run_id);
    // The child's call span covers the child's whole run.
    expect(call.startNs <= childRoot.startNs && call.endNs >= childRoot.endNs).toBe(true);
    const childJobs = spans.filter((span) => span.attributes['arcflow.run_id'] === child_run_id && span.name.startsWith('process '));
    expect(childJobs.length).toBeGreaterThan(0);
    expect(childJobs.every((span) => span.parentSpanId === childRoot.spanId)).toBe(true);
  });

  it('hold no input or answer of either run', () => {
    expect(JSON.stringify(spans, (_key, value) => (typeof value === 'bigint' ? String(value) : value))).not.toContain(CANARY);
  });
});
