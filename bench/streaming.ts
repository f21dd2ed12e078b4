// The cost of streaming (SPEC §12), against the fake OpenAI server on loopback, which streams:
// how much later than the server's first token the first text reaches a client reading the
// run's stream, how many Redis writes a 1,000-token answer's text takes, and runs per second
// streamed against the same runs with the provider not streaming, in the same process.
import { Agent, type StreamChunk, silentLogger } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type ArcflowClient, createClient, startWorker } from '@arcflow/queue';
import { type FakeStreamPacing, startFakeOpenAI } from '@arcflow/testing';
import { REDIS_URL, type Row, ms, percentile } from './lib.ts';

// Its runs stream unless the provider does not (SPEC §12).
const agent = new Agent({ name: 'bench_streamer', stream: true });

/** A worker and a client under `prefix`, its model a fake server streaming `content` as paced. */
async function streamingSetup(prefix: string, content: string, pacing: FakeStreamPacing, stream = true) {
  const server = await startFakeOpenAI({
    fallback: () => ({ type: 'text', content, usage: { prompt_tokens: 20, completion_tokens: Math.ceil(content.length / 4) } }),
    stream: pacing,
  });
  const provider = openaiProvider({ base_url: server.url, api_key: 'k', timeout_ms: 30_000, stream });
  const worker = await startWorker({ agents: [agent], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  return {
    server,
    client,
    close: async () => {
      await client.close();
      await worker.close();
      await server.close();
    },
  };
}

async function readStream(client: ArcflowClient, run_id: string, onChunk: (chunk: StreamChunk) => void = () => undefined): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = [];
  for await (const chunk of client.stream(run_id)) {
    onChunk(chunk);
    chunks.push(chunk);
  }
  return chunks;
}

/**
 * Time to first text chunk at a client reading the run's stream, less the fake server's own
 * time to first token (when it wrote its first text chunk), over `runs` runs one at a time;
 * and the server's time to first token (request read → first token) as the baseline.
 */
export async function firstTextRow(prefix: string, runs = 60): Promise<Row> {
  const setup = await streamingSetup(prefix, 'A short answer, streamed in small pieces over a few milliseconds.', { chunk_chars: 4, delay_ms: 2 });
  const overheads: number[] = [];
  const serverTtft: number[] = [];
  try {
    for (let index = 0; index < runs + 5; index += 1) {
      const { run_id } = await setup.client.enqueue({ agent: agent.name, input: `first text ${index}` });
      let firstTextAt: number | undefined;
      await readStream(setup.client, run_id, (chunk) => {
        if (chunk.type === 'text' && firstTextAt === undefined) firstTextAt = performance.now();
      });
      const request = setup.server.requests.at(-1)!;
      // The first few warm the connections and the scripts.
      if (index < 5 || firstTextAt === undefined || request.first_token_at === undefined) continue;
      overheads.push(firstTextAt - request.first_token_at);
      serverTtft.push(request.first_token_at - request.received_at);
    }
  } finally {
    await setup.close();
  }
  const overhead = percentile(overheads, 50);
  return {
    measure: `first text chunk at client.stream after the server's first token, p50 of ${overheads.length} runs (p95 ${ms(percentile(overheads, 95))})`,
    arcflow: `+${ms(overhead)}`,
    baseline: `${ms(percentile(serverTtft, 50))} (server TTFT)`,
    ratio: `+${ms(overhead)}`,
    target: '<= +5 ms p50',
    verdict: overhead <= 5 ? 'yes' : 'NO',
  };
}

/** Redis writes of a 1,000-token answer's text (one `text` chunk per write) against one write per delta, unbatched. */
export async function writesRow(prefix: string): Promise<Row> {
  // About 1,000 tokens: 4,000 characters in 4-character deltas, one a millisecond or so.
  const content = 'word '.repeat(800);
  const setup = await streamingSetup(prefix, content, { chunk_chars: 4, delay_ms: 1 });
  try {
    const { run_id } = await setup.client.enqueue({ agent: agent.name, input: 'a long answer' });
    const started = performance.now();
    const chunks = await readStream(setup.client, run_id);
    const seconds = (performance.now() - started) / 1000;
    const writes = chunks.filter((chunk) => chunk.type === 'text').length;
    const deltas = Math.ceil(content.length / 4);
    const bound = Math.ceil((seconds * 1000) / 50) + 2;
    return {
      measure: `Redis writes of a 1,000-token answer's text (${deltas} deltas over ${seconds.toFixed(1)} s)`,
      arcflow: `${writes} writes`,
      baseline: `${deltas} (a write per delta)`,
      ratio: `${(writes / deltas).toFixed(3)}x`,
      target: `<= 1 per 50 ms + 2 (${bound})`,
      verdict: writes <= bound ? 'yes' : 'NO',
    };
  } finally {
    await setup.close();
  }
}

/** Runs per second with the provider streaming (and a reader per run) against the same runs with it not streaming. */
export async function throughputRows(prefix: (name: string) => string, runs = 300): Promise<Row[]> {
  const content = 'An answer of a few hundred characters, streamed in pieces. '.repeat(6);
  const perSecond = async (stream: boolean, read = stream) => {
    const setup = await streamingSetup(prefix(stream ? (read ? 'streamed' : 'streamed-unread') : 'plain'), content, { chunk_chars: 24, delay_ms: 0 }, stream);
    try {
      const started = performance.now();
      const run_ids = (await Promise.all(Array.from({ length: runs }, (_, index) => setup.client.enqueue({ agent: agent.name, input: `run ${index}` })))).map(
        ({ run_id }) => run_id,
      );
      await Promise.all(run_ids.map((run_id) => (read ? readStream(setup.client, run_id) : setup.client.wait(run_id, { timeout_ms: 120_000 }))));
      return runs / ((performance.now() - started) / 1000);
    } finally {
      await setup.close();
    }
  };
  const plain = await perSecond(false);
  const streamed = await perSecond(true);
  const unread = await perSecond(true, false);
  return [
    {
      measure: `runs/s, ${runs} one-call runs, provider streaming, nobody reading (vs not streaming)`,
      arcflow: `${unread.toFixed(0)} runs/s`,
      baseline: `${plain.toFixed(0)} runs/s`,
      ratio: `${(unread / plain).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    },
    {
      measure: `runs/s, ${runs} one-call runs, provider streaming + a reader per run (vs not streaming, waited for)`,
      arcflow: `${streamed.toFixed(0)} runs/s`,
      baseline: `${plain.toFixed(0)} runs/s`,
      ratio: `${(streamed / plain).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    },
  ];
}
