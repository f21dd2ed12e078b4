import { type StreamChunk, StreamReassembler, silentLogger } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type ArcflowWorker, connectRedis, createClient, keysFor, startWorker } from '@arcflow/queue';
import { testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { expectedAnswer, startStreamFake } from './fixtures/stream-fake.ts';
import { fileCluster } from './harness.ts';

const clusterUrl = fileCluster();

describe('the run stream on a 3-master Redis Cluster (SPEC §9, §12)', () => {
  it("keeps the stream in its run's slot, and client.stream follows it to the end", async () => {
    const fake = await startStreamFake({ delay_ms: 5 });
    const prefix = testPrefix('stream-cluster');
    const agents = await import('./fixtures/stream-agents.ts');
    const provider = openaiProvider({ base_url: fake.url, api_key: 'k' });
    const worker: ArcflowWorker = await startWorker({ agents: agents.default, provider, redis: clusterUrl(), prefix, logger: silentLogger });
    const client = createClient({ redis: clusterUrl(), prefix });
    const redis = connectRedis(clusterUrl());
    try {
      const { run_id } = await client.enqueue({ agent: 'stream_agent', input: 'on a cluster' });
      const chunks: StreamChunk[] = [];
      for await (const chunk of client.stream(run_id)) chunks.push(chunk);
      const run = await client.get(run_id);
      const reassembler = new StreamReassembler();
      for (const chunk of chunks) reassembler.add(chunk);
      expect(reassembler.texts().map((entry) => entry.text)).toEqual([expectedAnswer('on a cluster')]);
      expect(run?.output).toBe(expectedAnswer('on a cluster'));
      expect(chunks.map((chunk) => chunk.offset)).toEqual(chunks.map((_, index) => index + 1));
      const keys = keysFor(prefix).run(run_id);
      expect(await redis.cluster('KEYSLOT', keys.stream)).toBe(await redis.cluster('KEYSLOT', keys.record));
    } finally {
      redis.disconnect();
      await client.close();
      await worker.close();
      await fake.close();
    }
  });
});
