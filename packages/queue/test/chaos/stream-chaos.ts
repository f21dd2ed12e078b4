import { type StreamChunk, StreamReassembler } from '@arcflow/core';
import { type ArcflowClient, createClient } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { expectedAnswer, startStreamFake } from '../fixtures/stream-fake.ts';
import { WorkerFleet } from './worker-fleet.ts';

const FIXTURE = new URL('../fixtures/stream-agents.ts', import.meta.url).pathname;

export interface StreamChaosOptions {
  readonly runs: number;
  readonly workers: number;
  /** A random worker is SIGKILLed this often (while runs stream), and a new one started. */
  readonly killEveryMs: number;
  /** How long the runs may take to end, in all. */
  readonly timeoutMs: number;
  /** The fake server's pause between chunks (the longer, the more kills land mid-stream). */
  readonly chunkDelayMs?: number;
  readonly log?: (line: string) => void;
}

export interface StreamChaosReport {
  readonly runs: number;
  readonly completed: number;
  readonly workerKills: number;
  /** Runs whose stream has a `reset` (a provider call made again after a kill). */
  readonly runsWithReset: number;
  readonly chunks: number;
  readonly gaps: number;
  readonly duplicates: number;
  readonly seconds: number;
  /** Every breach, one line each; empty when they all held. */
  readonly violations: readonly string[];
}

/**
 * Runs `runs` streaming runs (a tool round, then a paced answer) on real worker processes while
 * workers are SIGKILLed mid-stream, each run read by a reader that reconnects after every k-th
 * chunk (k random per run), then checks: offsets 1, 2, 3 … with no gap and no duplicate, `end`
 * last and once, and the reassembled text of the last iteration equal to the record's output
 * and to what the model wrote.
 */
export async function runStreamChaos(options: StreamChaosOptions): Promise<StreamChaosReport> {
  const log = options.log ?? (() => undefined);
  const prefix = testPrefix('stream-chaos');
  const fake = await startStreamFake({ delay_ms: options.chunkDelayMs ?? 15 });
  // As in the chaos run: workers die far more often than in a fleet, so a job may lose five before its call ends worker_lost.
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, STREAM_FAKE_URL: fake.url, ARCFLOW_MAX_STALLED_COUNT: '5' };
  const fleet = new WorkerFleet(FIXTURE, env, log);
  const client = createClient({ redis: TEST_REDIS_URL, prefix, redis_timeout_ms: 30_000 });
  const started = Date.now();
  try {
    await fleet.start(options.workers);
    const inputs = Array.from({ length: options.runs }, (_, index) => `stream run ${index}`);
    const run_ids = (await Promise.all(inputs.map((input) => client.enqueue({ agent: 'stream_agent', input })))).map(({ run_id }) => run_id);
    log(`enqueued ${run_ids.length} runs`);
    fleet.killEvery(options.killEveryMs);
    const deadline = Date.now() + options.timeoutMs;
    const streams = await Promise.all(run_ids.map((run_id) => readReconnecting(client, run_id, deadline)));
    await fleet.stopKilling();
    log('every stream has ended; checking');
    const violations: string[] = [];
    let completed = 0;
    let gaps = 0;
    let duplicates = 0;
    for (const [index, run_id] of run_ids.entries()) {
      const chunks = streams[index]!;
      const run = await client.get(run_id);
      if (run?.status === 'completed') completed += 1;
      else violations.push(`${run_id} ended ${run?.status}${run?.error ? ` (${run.error.error_code}: ${run.error.message})` : ''}`);
      for (const [position, chunk] of chunks.entries()) {
        if (chunk.offset < position + 1) duplicates += 1;
        if (chunk.offset > position + 1) gaps += 1;
      }
      if (chunks.filter((chunk) => chunk.type === 'end').length !== 1 || chunks.at(-1)?.type !== 'end') violations.push(`${run_id}: end is not last and once`);
      const reassembler = new StreamReassembler();
      for (const chunk of chunks) reassembler.add(chunk);
      const last = reassembler.texts().at(-1)?.text;
      if (last !== run?.output) violations.push(`${run_id}: the stream's text is not the output`);
      if (last !== expectedAnswer(inputs[index]!)) violations.push(`${run_id}: the stream's text is not what the model wrote`);
    }
    if (gaps > 0) violations.push(`${gaps} gaps`);
    if (duplicates > 0) violations.push(`${duplicates} duplicates`);
    return {
      runs: run_ids.length,
      completed,
      workerKills: fleet.kills,
      runsWithReset: streams.filter((chunks) => chunks.some((chunk) => chunk.type === 'reset')).length,
      chunks: streams.reduce((sum, chunks) => sum + chunks.length, 0),
      gaps,
      duplicates,
      seconds: (Date.now() - started) / 1000,
      violations,
    };
  } finally {
    fleet.killAll();
    await client.close();
    await fake.close();
    await cleanupPrefix(prefix);
  }
}

/** A run's stream, read by a reader that stops after every k-th chunk (k from 1 to 5) and resumes after the last offset it has. */
async function readReconnecting(client: ArcflowClient, run_id: string, deadline: number): Promise<StreamChunk[]> {
  const k = 1 + Math.floor(Math.random() * 5);
  const chunks: StreamChunk[] = [];
  while (chunks.at(-1)?.type !== 'end') {
    if (Date.now() > deadline) throw new Error(`${run_id}: its stream did not end in time`);
    let read = 0;
    for await (const chunk of client.stream(run_id, { after: chunks.at(-1)?.offset ?? 0 })) {
      chunks.push(chunk);
      read += 1;
      if (read === k) break;
    }
  }
  return chunks;
}
