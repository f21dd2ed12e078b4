import { Agent, INPUT_MESSAGE_LIMITS, MAX_INPUT_BYTES, RequestError, Workflow, checkRunInput, runLocal } from '@arcflow/core';
import { reply, scriptedProvider } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';

// SPEC §11, first paragraph: a run's input is a string or a list of chat messages, checked at
// enqueue; a refusal names the message's index and field.

/** The code and message of the RequestError `checkRunInput` throws for `input`. */
function refusal(input: unknown): { code: string; message: string } {
  try {
    checkRunInput(input);
  } catch (error) {
    expect(error).toBeInstanceOf(RequestError);
    return { code: (error as RequestError).code, message: (error as Error).message };
  }
  throw new Error('expected a RequestError, got none');
}

const user = (content: unknown) => ({ role: 'user', content });
const png = (bytes: number) => `data:image/png;base64,${'A'.repeat(bytes - 'data:image/png;base64,'.length)}`;

describe('checkRunInput', () => {
  it('takes a string, and a conversation with parts, names, tool calls and their results, as given', () => {
    expect(checkRunInput('hello')).toBe('hello');
    const conversation = [
      { role: 'system', content: 'Answer briefly.' },
      {
        role: 'user',
        name: 'ada',
        content: [
          { type: 'text', text: 'What is in this picture?' },
          { type: 'image_url', image_url: { url: png(1_000), detail: 'low' } },
        ],
      },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'look', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'a cat' }] },
      { role: 'assistant', content: 'A cat.' },
      user('And its colour? https://example.com/cat.jpg'),
    ];
    expect(checkRunInput(conversation)).toBe(conversation);
  });

  it('takes an assistant message as the OpenAI SDK returns it, with its refusal field (null or text); refuses another refusal value', () => {
    const conversation = [
      user('hi'),
      { role: 'assistant', content: 'Hello.', refusal: null },
      user('and?'),
      { role: 'assistant', content: null, refusal: 'I cannot help with that.' },
      user('ok'),
    ];
    expect(checkRunInput(conversation)).toBe(conversation);
    expect(refusal([user('hi'), { role: 'assistant', content: 'x', refusal: 5 }]).message).toBe('input[1].refusal: expected a string or null');
    expect(refusal([user('hi'), { role: 'user', content: 'x', refusal: null }]).message).toBe('input[1].refusal: not a field of a user message (allowed: role, content, name)');
  });

  it('refuses an unknown role, naming the index and the roles', () => {
    expect(refusal([user('hi'), { role: 'assistant', content: 'yes' }, { role: 'robot', content: 'beep' }])).toEqual({
      code: 'invalid_input',
      message: "input[2].role: expected 'user', 'assistant', 'system', 'developer' or 'tool', got 'robot'",
    });
    expect(refusal([{ content: 'no role' }]).message).toBe("input[0].role: expected 'user', 'assistant', 'system', 'developer' or 'tool'");
  });

  it('takes a developer message, checked like a system message', () => {
    const conversation = [{ role: 'developer', content: 'Answer in French.', name: 'ops' }, { role: 'developer', content: [{ type: 'text', text: 'Be brief.' }] }, user('hi')];
    expect(checkRunInput(conversation)).toBe(conversation);
    expect(refusal([{ role: 'developer', content: [{ type: 'image_url', image_url: { url: png(100) } }] }]).message).toBe(
      'input[0].content[0].type: image_url parts go in user messages, not developer messages',
    );
    expect(refusal([{ role: 'developer', content: 'x', tool_calls: [] }]).message).toBe('input[0].tool_calls: not a field of a developer message (allowed: role, content, name)');
    expect(refusal([{ role: 'developer', content: 7 }]).message).toBe('input[0].content: expected a string or a list of text parts');
  });

  it('refuses a tool message with no tool_call_id, or one that answers no call before it', () => {
    const asked = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] };
    expect(refusal([asked, { role: 'tool', content: 'x' }])).toEqual({ code: 'invalid_input', message: 'input[1].tool_call_id: required on a tool message (a non-empty string)' });
    expect(refusal([asked, { role: 'tool', tool_call_id: 'c9', content: 'x' }]).message).toBe(
      "input[1].tool_call_id: 'c9' answers no open call of the assistant message before it",
    );
    expect(refusal([asked, user('well?')]).message).toBe("input[0].tool_calls[0]: no tool message answers call 'c1'");
    expect(refusal([asked]).message).toBe("input[0].tool_calls[0]: no tool message answers call 'c1'");
    expect(refusal([{ role: 'assistant', content: null }]).message).toBe('input[0].content: required on an assistant message without tool_calls or a refusal');
  });

  it('refuses an image URL over its limit (input_too_large) and a URL of another scheme', () => {
    const big = png(INPUT_MESSAGE_LIMITS.max_data_url_bytes + 1);
    expect(
      refusal([
        user([
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: big } },
        ]),
      ]),
    ).toEqual({
      code: 'input_too_large',
      message: `input[0].content[1].image_url.url: ${INPUT_MESSAGE_LIMITS.max_data_url_bytes + 1} bytes; the limit is ${INPUT_MESSAGE_LIMITS.max_data_url_bytes} for a data: URL`,
    });
    const long = `https://example.com/${'a'.repeat(INPUT_MESSAGE_LIMITS.max_url_bytes)}`;
    expect(refusal([user([{ type: 'image_url', image_url: { url: long } }])]).message).toMatch(/^input\[0\]\.content\[0\]\.image_url\.url: \d+ bytes; the limit is 8192$/);
    expect(refusal([user([{ type: 'image_url', image_url: { url: 'file:///etc/passwd' } }])]).message).toBe(
      'input[0].content[0].image_url.url: expected an https:, http: or data: URL',
    );
    expect(refusal([{ role: 'system', content: [{ type: 'image_url', image_url: { url: png(100) } }] }]).message).toBe(
      'input[0].content[0].type: image_url parts go in user messages, not system messages',
    );
  });

  it('refuses a text part whose text is not a string, and content that is neither a string nor a list', () => {
    expect(
      refusal([
        user([
          { type: 'text', text: 'a' },
          { type: 'text', text: 42 },
        ]),
      ]),
    ).toEqual({ code: 'invalid_input', message: 'input[0].content[1].text: expected a string' });
    expect(refusal([user({ text: 'hi' })])).toEqual({ code: 'invalid_input', message: 'input[0].content: expected a string or a list of text and image_url parts' });
    expect(refusal([{ role: 'tool', tool_call_id: 'c1', content: 7 }]).message).toBe('input[0].content: expected a string or a list of text parts');
    expect(refusal([user([])]).message).toBe('input[0].content: expected at least one part');
    expect(refusal([user([{ type: 'audio', data: 'x' }])]).message).toBe("input[0].content[0].type: expected 'text' or 'image_url'");
  });

  it('refuses an input of too many bytes, as a string or as messages', () => {
    expect(refusal('x'.repeat(MAX_INPUT_BYTES + 1))).toEqual({ code: 'input_too_large', message: `input is ${MAX_INPUT_BYTES + 1} bytes; the limit is ${MAX_INPUT_BYTES}` });
    const many = Array.from({ length: 3 }, () => user('y'.repeat(100 * 1024)));
    expect(refusal(many)).toEqual({ code: 'input_too_large', message: expect.stringMatching(/^input is \d+ bytes as JSON; the limit is 262144$/) });
  });

  it('refuses other shapes with the field they are in: not a list, empty, a non-object message, unknown fields', () => {
    expect(refusal(42).message).toBe('input: expected a string or a list of messages');
    expect(refusal(undefined).message).toBe('input: expected a string or a list of messages');
    expect(refusal([]).message).toBe('input: expected at least one message');
    expect(refusal(['hi']).message).toBe('input[0]: expected a message { role, content }');
    expect(refusal([{ role: 'tool', tool_callid: 'c1', content: 'x' }]).message).toBe("input[0].tool_callid: not a field of a tool message; did you mean 'tool_call_id'?");
    expect(refusal([{ role: 'user', content: 'x', tool_calls: [] }]).message).toBe('input[0].tool_calls: not a field of a user message (allowed: role, content, name)');
    expect(refusal([user('x'), { role: 'assistant', content: 'y', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: {} } }] }]).message).toBe(
      'input[1].tool_calls[0].function.arguments: expected a string (the arguments as JSON text)',
    );
    expect(refusal([user([{ type: 'image_url', image_url: { url: png(100), detail: 'max' } }])]).message).toBe(
      "input[0].content[0].image_url.detail: expected 'auto', 'low' or 'high'",
    );
  });

  it('never throws anything but a RequestError, whatever the value', () => {
    const values: unknown[] = [null, {}, [null], [[]], [{ role: '__proto__', content: 'x' }], [{ role: 'user', content: [null] }], [{ role: 'user', content: 'x', name: 5 }], [1n]];
    for (const value of values) expect(() => checkRunInput(value)).toThrow(RequestError);
  });
});

describe('runLocal with a list of messages', () => {
  const agent = new Agent({ name: 'describer', instructions: 'Describe pictures.' });

  it('gives the provider the instructions as a system message, then the input messages as given', async () => {
    const model = scriptedProvider([reply('A cat on a mat.')]);
    const input = [
      { role: 'user', content: 'I will send a picture.' },
      { role: 'assistant', content: 'Go ahead.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Here:' },
          { type: 'image_url', image_url: { url: png(200) } },
        ],
      },
    ] as const;
    const run = await runLocal(agent, input, { provider: model, logger: false });
    expect(run).toMatchObject({ status: 'completed', output: 'A cat on a mat.' });
    expect(model.requests[0]?.messages).toEqual([{ role: 'system', content: 'Describe pictures.' }, ...input]);
  });

  it('gives the provider a developer message as it is', async () => {
    const model = scriptedProvider([reply('Bonjour.')]);
    const input = [
      { role: 'developer', content: 'Answer in French.' },
      { role: 'user', content: 'Hello.' },
    ] as const;
    expect(await runLocal(agent, input, { provider: model, logger: false })).toMatchObject({ status: 'completed', output: 'Bonjour.' });
    expect(model.requests[0]?.messages).toEqual([{ role: 'system', content: 'Describe pictures.' }, ...input]);
  });

  it('refuses a bad message before anything runs, and a list for a workflow', async () => {
    const model = scriptedProvider([reply('never')]);
    await expect(
      runLocal(
        agent,
        [
          { role: 'user', content: 'x' },
          { role: 'tool', content: 'y' },
        ] as never,
        { provider: model },
      ),
    ).rejects.toThrow('input[1].tool_call_id: required on a tool message');
    expect(model.requests).toHaveLength(0);
    const flow = new Workflow({ name: 'flow', steps: [{ id: 'a', agent }] });
    await expect(runLocal(flow, [{ role: 'user', content: 'x' }], { provider: model })).rejects.toThrow("input: workflow 'flow' takes a string");
  });
});
