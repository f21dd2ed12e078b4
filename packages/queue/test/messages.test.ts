import { Agent, type ModelProvider, RequestError, Workflow, byteSize, silentLogger } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, assertEventInvariants, reply, scriptedProvider, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { StoredFormatError } from '../src/records/formats.ts';
import { readInput, writeInput } from '../src/records/input-format.ts';
import { FAST, collect, testResources } from './harness.ts';

// SPEC §11, first paragraph, through the BullMQ engine: a run's input as a list of chat messages,
// checked by the client before anything is written, kept in the run record, and sent to an
// OpenAI-compatible server as given, after the agent's instructions.

const { prefixes, open, redis } = testResources();

const describer = new Agent({ name: 'describer', instructions: 'Describe pictures.' });
const IMAGE = `data:image/png;base64,${'iVBORw0KGgo'.repeat(40)}`;

async function engine(name: string, provider: ModelProvider, agents: (Agent | Workflow)[] = [describer]) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  open.push(await startWorker({ agents, provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return { prefix, client };
}

describe('a run whose input is a list of messages', () => {
  it('sends the instructions, then the multi-turn input with its image part, to the model as given', async () => {
    const fake = await startFakeOpenAI({ turns: [{ type: 'text', content: 'A tabby cat.' }] });
    open.push(fake);
    const { client } = await engine('messages-wire', openaiProvider({ base_url: fake.url, api_key: 'k', model: 'vision-model' }));
    const input = [
      { role: 'system', content: 'The user is a vet.' },
      { role: 'user', content: 'I will send you a picture.' },
      { role: 'assistant', content: 'Please do.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What breed?' },
          { type: 'image_url', image_url: { url: IMAGE, detail: 'high' } },
        ],
      },
    ] as const;
    const { run_id } = await client.enqueue({ agent: 'describer', input });
    const run = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(run).toMatchObject({ status: 'completed', output: 'A tabby cat.' });
    const sent = [{ role: 'system', content: 'Describe pictures.' }, ...input];
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]!.body.messages).toEqual(sent);
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    // The prompt's size is the size of the messages as sent, parts and all.
    expect(events.find((event) => event.kind === 'ProviderRequestSent')).toMatchObject({ prompt_size_bytes: byteSize(JSON.stringify(sent)) });
  });

  it('runs a string input as one user message, as before', async () => {
    const model = scriptedProvider([reply('ok')]);
    const { client } = await engine('messages-string', model);
    const { run_id } = await client.enqueue({ agent: 'describer', input: '[{"role":"user","content":"not a list"}]' });
    expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    expect(model.requests[0]!.messages.at(-1)).toEqual({ role: 'user', content: '[{"role":"user","content":"not a list"}]' });
  });

  it('refuses a bad message, and a list for a workflow, naming the field, with nothing queued', async () => {
    const flow = new Workflow({ name: 'flow', steps: [{ id: 'a', agent: describer }] });
    const { client, prefix } = await engine('messages-refused', scriptedProvider([reply('never')], { repeat: true }), [describer, flow]);
    const refused = async (agent: string, input: unknown) => {
      const error = await client.enqueue({ agent, input: input as never }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(RequestError);
      return { code: (error as RequestError).code, message: (error as Error).message };
    };
    expect(
      await refused('describer', [
        { role: 'user', content: 'hi' },
        { role: 'bot', content: 'x' },
      ]),
    ).toEqual({
      code: 'invalid_input',
      message: "input[1].role: expected 'user', 'assistant', 'system', 'developer' or 'tool', got 'bot'",
    });
    expect((await refused('describer', [{ role: 'tool', content: 'x' }])).message).toBe('input[0].tool_call_id: required on a tool message (a non-empty string)');
    expect(await refused('describer', [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(200 * 1024)}` } }] }])).toMatchObject({
      code: 'input_too_large',
      message: expect.stringMatching(/^input\[0\]\.content\[0\]\.image_url\.url: \d+ bytes; the limit is 196608 for a data: URL$/),
    });
    expect((await refused('describer', 42)).message).toBe('input: expected a string or a list of messages');
    expect((await refused('flow', [{ role: 'user', content: 'hi' }])).message).toBe("input: workflow 'flow' takes a string; a list of messages is for an agent run");
    expect((await client.list()).runs).toEqual([]);
    expect(await redis.keys(`{${prefix}}:run:*`)).toEqual([]);
    expect(await redis.keys(`{${prefix}}:agent-*:run_*`)).toEqual([]);
  });
});

describe('the stored input', () => {
  it('keeps a string as it is and a list as JSON marked messages; reads back what it wrote', () => {
    expect(writeInput('hi')).toEqual({ input: 'hi' });
    const messages = [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] as const;
    const stored = writeInput(messages);
    expect(stored).toEqual({ input: JSON.stringify(messages), input_kind: 'messages' });
    expect(readInput(stored.input, stored.input_kind, 'input')).toEqual(messages);
    // A record written before messages existed has no kind: its input is a string, whatever it looks like.
    expect(readInput('[1,2]', null, 'input')).toBe('[1,2]');
  });

  it('refuses to read a list no arcflow wrote, or a kind it does not know', () => {
    expect(() => readInput('[{"role":"robot"}]', 'messages', 'input of run r')).toThrow(StoredFormatError);
    expect(() => readInput('not json', 'messages', 'input of run r')).toThrow('input of run r is not as arcflow writes it');
    expect(() => readInput('x', 'audio', 'input of run r')).toThrow(StoredFormatError);
  });
});
