import { context, trace } from '@opentelemetry/api';
import { createClient, keysFor } from '@arcflow/queue';
import { type OtlpReceiver, type ReceivedSpan, TEST_REDIS_URL, cleanupPrefix, startOtlpReceiver, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const FIXTURE = new URL('./fixtures/traced-agents.ts', import.meta.url).pathname;
const CANARY = `CANARY_${Math.random().toString(36).slice(2, 10)}`;
const prefix = testPrefix('tracing');
const CONSUMER = 5;
const CLIENT = 3;
const INTERNAL = 1;

let receiver: OtlpReceiver;
let spans: ReceivedSpan[];
let receivedBeforeStop: number;
let run_id: string;
let cancelledRunId: string;
let flowRunId: string;
let flowTraceparent: string;
let runTraceparent: string;
let requestSpanId: string;
let exitCodes: (number | string)[];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  const env = {
    REDIS_URL: TEST_REDIS_URL,
    ARCFLOW_PREFIX: prefix,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: 'arcflow-test-worker',
    // Nothing is exported before shutdown, so the spans can only arrive through the flush on SIGTERM.
    OTEL_BSP_SCHEDULE_DELAY: '600000',
    CANARY,
    OPENAI_API_KEY: '',
    OPENAI_BASE_URL: '',
  };
  const workers: WorkerProcess[] = await Promise.all([spawnWorker(FIXTURE, { env }), spawnWorker(FIXTURE, { env })]);
  // The backend's own tracing: enqueue inside an active "request" span.
  const provider = new NodeTracerProvider();
  provider.register();
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  const request = trace.getTracer('backend').startSpan('POST /trips');
  requestSpanId = request.spanContext().spanId;
  ({ run_id } = await context.with(trace.setSpan(context.active(), request), () =>
    client.enqueue({ agent: 'traced_agent', input: `${CANARY}-input`, state: { seed: `${CANARY}-initial-state` } }),
  ));
  request.end();
  const run = await client.wait(run_id, { timeout_ms: 30_000 });
  expect(run.status).toBe('completed');
  ({ run_id: flowRunId } = await client.enqueue({ agent: 'traced_flow', input: `${CANARY}-flow-input` }));
  expect((await client.wait(flowRunId, { timeout_ms: 30_000 })).status).toBe('completed');
  // A run cancelled from this process (which does not export spans): a worker emits its root.
  ({ run_id: cancelledRunId } = await client.enqueue({ agent: 'stalling_agent', input: 'wait' }));
  for (let tries = 0; tries < 200; tries += 1) {
    const events = [];
    for await (const event of client.events(cancelledRunId)) events.push(event);
    if (events.some((event) => event.kind === 'ToolCallStarted')) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect((await client.cancel(cancelledRunId)).cancelled).toBe(true);
  await new Promise((resolve) => setTimeout(resolve, 500));
  await client.close();
  const redis = new Redis(TEST_REDIS_URL);
  runTraceparent = JSON.parse((await redis.hget(keysFor(prefix).run(run_id).record, 'trace'))!).traceparent;
  flowTraceparent = JSON.parse((await redis.hget(keysFor(prefix).run(flowRunId).record, 'trace'))!).traceparent;
  await redis.quit();
  receivedBeforeStop = receiver.spans().length;
  exitCodes = await Promise.all(workers.map((worker) => worker.stop()));
  spans = receiver.spans();
}, 90_000);

afterAll(async () => {
  await receiver?.close();
  await cleanupPrefix(prefix);
});

/** The first run's spans: those in its trace. */
const runSpans = () => spans.filter((span) => span.traceId === runTraceparent.split('-')[1]);
const named = (prefix: string) => runSpans().filter((span) => span.name.startsWith(prefix));

describe('one trace per run, across two worker processes', () => {
  it('exports only on shutdown, as OTLP/HTTP JSON to /v1/traces, named by OTEL_SERVICE_NAME', () => {
    expect(exitCodes).toEqual([0, 0]);
    expect(receivedBeforeStop).toBe(0);
    expect(spans.length).toBeGreaterThan(10);
    // With the endpoint set, metrics go there too (SPEC §18), at their own path.
    expect(receiver.bodies.every((body) => ['/v1/traces', '/v1/metrics'].includes(body.path) && body.contentType?.startsWith('application/json'))).toBe(true);
    expect(new Set(spans.filter((span) => span.name !== 'POST /trips').map((span) => span.serviceName))).toEqual(new Set(['arcflow-test-worker']));
  });

  it("puts every span of the run in the run's trace, under its invoke_agent root", () => {
    const [, traceId, rootSpanId] = runTraceparent.split('-');
    expect(new Set(spans.filter((span) => span.attributes['arcflow.run_id'] === run_id).map((span) => span.traceId))).toEqual(new Set([traceId]));
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(3);
    const [root] = named('invoke_agent');
    expect(named('invoke_agent')).toHaveLength(1);
    expect(root).toMatchObject({ name: 'invoke_agent traced_agent', kind: INTERNAL, spanId: rootSpanId, parentSpanId: undefined });
    expect(root!.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'traced_agent',
      'arcflow.run_id': run_id,
      'gen_ai.usage.input_tokens': 33,
    });
    expect(root!.links.map((link) => link.spanId)).toContain(requestSpanId);
    // A provider job is a `process` span; a tool job has none of its own: its call's `execute_tool` span stands for it.
    const jobs = named('process ').filter((span) => span.attributes['arcflow.run_id'] === run_id);
    expect(jobs.every((span) => span.kind === CONSUMER && span.parentSpanId === rootSpanId)).toBe(true);
    expect(jobs.map((span) => span.name)).toEqual(Array(3).fill('process agent-traced_agent'));
    const jobIds = new Set(jobs.map((span) => span.spanId));
    expect(named('chat ').every((span) => jobIds.has(span.parentSpanId!))).toBe(true);
    const tools = named('execute_tool ').filter((span) => span.attributes['arcflow.run_id'] === run_id);
    expect(tools).toHaveLength(6);
    for (const tool of tools) {
      expect(tool.parentSpanId).toBe(rootSpanId);
      expect(tool.attributes).toMatchObject({ 'messaging.system': 'bullmq', 'messaging.operation.type': 'process', 'arcflow.job.attempt': 1 });
      expect(tool.attributes['messaging.destination.name']).toMatch(/^tool-probe-[0-9a-f]{16}$/);
      expect(tool.attributes['messaging.message.id']).toContain(`.i${tool.attributes['arcflow.iteration']}.${tool.attributes['gen_ai.tool.call.id']}`);
      // It links to the provider job that fanned it out.
      const fannedOutBy = jobs.find((job) => job.attributes['arcflow.iteration'] === tool.attributes['arcflow.iteration'])!;
      expect(tool.links.map((link) => link.spanId)).toEqual([fannedOutBy.spanId]);
    }
    // The handler's own spans nest under its execute_tool span.
    const toolIds = new Set(tools.map((span) => span.spanId));
    expect(named('leaky op').every((span) => toolIds.has(span.parentSpanId!))).toBe(true);
  });

  it('records chat and execute_tool spans with the GenAI attributes', () => {
    const chats = named('chat ');
    expect(chats).toHaveLength(3);
    for (const chat of chats) {
      expect(chat).toMatchObject({ name: 'chat fixture-model', kind: CLIENT });
      expect(chat.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'fixture',
        'gen_ai.request.model': 'fixture-model',
        'gen_ai.usage.input_tokens': 11,
        'gen_ai.usage.output_tokens': 3,
        'arcflow.run_id': run_id,
        'arcflow.step_id': 's1',
        'gen_ai.request.temperature': 0.3,
        'gen_ai.request.max_tokens': 256,
        'gen_ai.request.top_p': 0.8,
        'gen_ai.request.seed': 11,
      });
      // No other setting: only the request attributes the GenAI conventions name.
      expect(
        Object.keys(chat.attributes)
          .filter((key) => key.startsWith('gen_ai.request.'))
          .sort(),
      ).toEqual(['gen_ai.request.max_tokens', 'gen_ai.request.model', 'gen_ai.request.seed', 'gen_ai.request.temperature', 'gen_ai.request.top_p']);
    }
    expect(chats.map((chat) => chat.attributes['arcflow.iteration']).sort()).toEqual([1, 2, 3]);
    const tools = named('execute_tool ');
    expect(tools).toHaveLength(6);
    expect(tools.every((span) => span.kind === INTERNAL && span.attributes['gen_ai.tool.name'] === 'probe')).toBe(true);
    const failed = tools.filter((span) => span.attributes['error.type'] === 'tool_error');
    expect(failed.map((span) => span.attributes['gen_ai.tool.call.id']).sort()).toEqual(['call_1_2', 'call_2_2']);
    expect(failed.every((span) => span.status.code === 2 && span.status.message === 'tool_error')).toBe(true);
  });

  it('shows the parallel tools as overlapping siblings, and links the join to them', () => {
    const round1 = named('execute_tool ').filter((span) => span.attributes['arcflow.iteration'] === 1);
    expect(round1).toHaveLength(3);
    // biome-ignore lint/complexity/useMathMinMax: the times are BigInts, which Math.max does not take
    const latestStart = round1.reduce((max, span) => (span.startNs > max ? span.startNs : max), 0n);
    // biome-ignore lint/complexity/useMathMinMax: the times are BigInts, which Math.min does not take
    const earliestEnd = round1.reduce((min, span) => (span.endNs < min ? span.endNs : min), round1[0]!.endNs);
    expect(latestStart).toBeLessThan(earliestEnd);
    // The run's own join: the cancelled run has a provider job for iteration 2 too (it finds the run ended).
    const join = runSpans().find((span) => span.name === 'process agent-traced_agent' && span.attributes['arcflow.iteration'] === 2)!;
    expect(join.links.map((link) => link.spanId)).toEqual(expect.arrayContaining(round1.map((span) => span.spanId)));
  });

  it('emits the root span of a run cancelled from a process that does not trace, once', () => {
    const roots = spans.filter((span) => span.name === 'invoke_agent stalling_agent');
    expect(roots).toHaveLength(1);
    expect(roots[0]!.attributes).toMatchObject({ 'arcflow.run_id': cancelledRunId, 'arcflow.run.status': 'cancelled', 'error.type': 'cancelled' });
    expect(roots[0]!.status.code).toBe(2);
    const toolSpan = spans.find((span) => span.name === 'execute_tool stall');
    expect(toolSpan?.attributes['error.type']).toBe('cancelled');
    expect(toolSpan?.traceId).toBe(roots[0]!.traceId);
  });

  it('traces a workflow run under invoke_workflow, with an invoke_agent span per agent step and execute_tool for its tool step', () => {
    const [, traceId, rootSpanId] = flowTraceparent.split('-');
    const flow = spans.filter((span) => span.traceId === traceId);
    const root = flow.find((span) => span.name === 'invoke_workflow traced_flow');
    expect(root).toMatchObject({ spanId: rootSpanId, parentSpanId: undefined });
    expect(root!.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_workflow', 'arcflow.run_id': flowRunId, 'arcflow.run.status': 'completed' });
    const step = flow.find((span) => span.name === 'invoke_agent flow_writer');
    expect(step).toMatchObject({ parentSpanId: rootSpanId });
    expect(step!.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'arcflow.step_id': 'research' });
    const stepJobs = flow.filter((span) => span.name === 'process agent-traced_flow' && span.attributes['arcflow.step_id'] === 'research');
    expect(stepJobs.length).toBeGreaterThan(0);
    expect(stepJobs.every((span) => span.parentSpanId === step!.spanId)).toBe(true);
    const chat = flow.find((span) => span.name === 'chat fixture-model');
    expect(stepJobs.map((span) => span.spanId)).toContain(chat?.parentSpanId);
    // An agent without settings: a chat span with none of the request settings.
    expect(Object.keys(chat!.attributes).filter((key) => key.startsWith('gen_ai.request.'))).toEqual(['gen_ai.request.model']);
    const toolSpan = flow.find((span) => span.name === 'execute_tool probe');
    expect(toolSpan?.attributes).toMatchObject({ 'arcflow.step_id': 'probe_step', 'gen_ai.tool.call.id': 'probe_step' });
  });

  it('exports no canary and no content attribute, even from a leaky instrumentation', () => {
    const raw = receiver.bodies.map((body) => body.body).join('\n');
    expect(raw).not.toContain(CANARY);
    expect(raw).not.toContain('gen_ai.tool.call.arguments');
    expect(raw).not.toContain('gen_ai.tool.call.result');
    const leaky = named('leaky op');
    expect(leaky).toHaveLength(6);
    expect(leaky.every((span) => span.eventCount === 0 && Object.keys(span.attributes).length === 0)).toBe(true);
  });
});
