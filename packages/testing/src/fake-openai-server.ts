import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type FakeStreamFault, type FakeStreamPacing, writeStreamedAnswer } from './fake-openai-stream.ts';

export type { FakeStreamFault, FakeStreamPacing } from './fake-openai-stream.ts';

/** One turn the fake server serves. */
export type FakeTurn =
  | { type: 'text'; content: string; usage?: { prompt_tokens: number; completion_tokens: number }; stream_fault?: FakeStreamFault }
  | {
      type: 'tools';
      calls: { name: string; arguments: unknown; id?: string }[];
      usage?: { prompt_tokens: number; completion_tokens: number };
      stream_fault?: FakeStreamFault;
    }
  /** The model declines: no text and no calls, `refusal` instead (`delta.refusal` when streamed). */
  | { type: 'refusal'; refusal: string; usage?: { prompt_tokens: number; completion_tokens: number } }
  | { type: 'status'; status: number; headers?: Record<string, string>; body?: unknown }
  | { type: 'malformed' }
  | { type: 'hang' };

/** What the handler sees of a request. */
export interface FakeRequest {
  readonly body: Record<string, any>;
  readonly headers: IncomingMessage['headers'];
  /** When the request had been read (`performance.now()`). */
  readonly received_at: number;
  /** When the first text or call chunk of a streamed answer was written (`performance.now()`). */
  first_token_at?: number;
}

export interface FakeOpenAIOptions {
  turns?: FakeTurn[];
  /** May be async: the request is answered once it settles (a test can act between a request and its answer). */
  fallback?: (request: FakeRequest) => FakeTurn | Promise<FakeTurn>;
  /** How a streamed answer is paced (SPEC §12); a request with `stream: true` is answered as Server-Sent Events. */
  stream?: FakeStreamPacing;
  /**
   * Answers every request with a whole JSON response, even one that asks to stream (a server that
   * cannot stream). A request that asked to stream does not use its turn up: the next request gets
   * it again, as a server that ignores `stream` gives the same answer to the same request.
   */
  never_stream?: boolean;
  /**
   * A server that streams badly: a request with `stream: true` is answered HTTP 500 when the turn
   * holds tool calls (`tool_calls`) or whenever it is an answer (`always`); plain requests work.
   * The refused request does not use its turn up: the next request gets it.
   */
  cannot_stream?: 'tool_calls' | 'always';
}

export interface FakeOpenAIServer {
  /** Base URL to give the `openai` client, ending in `/v1`. */
  readonly url: string;
  /** Every chat-completions request body received, in order. */
  readonly requests: FakeRequest[];
  /** Adds turns to the queue served in order. */
  push(...turns: FakeTurn[]): void;
  /** Replaces the queue of turns. */
  reset(turns: FakeTurn[]): void;
  close(): Promise<void>;
}

/**
 * A fake OpenAI-compatible server on loopback. It serves queued turns in order; when the queue
 * is empty it asks `fallback` (if given) for the turn, so tests with many runs can answer by
 * looking at the conversation.
 */
export async function startFakeOpenAI(options: FakeOpenAIOptions = {}): Promise<FakeOpenAIServer> {
  const queue = [...(options.turns ?? [])];
  const requests: FakeRequest[] = [];
  const hanging = new Set<ServerResponse>();
  let completionSeq = 0;
  const server: Server = createServer(async (req, res) => {
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request: FakeRequest = { body: JSON.parse(Buffer.concat(chunks).toString('utf8')), headers: req.headers, received_at: performance.now() };
    requests.push(request);
    const queued = queue.shift();
    const turn = queued ?? (await options.fallback?.(request)) ?? { type: 'status', status: 500, body: { error: { message: 'fake server: no turn queued' } } };
    completionSeq += 1;
    const model = request.body.model ?? 'fake-model';
    const answers = turn.type === 'text' || turn.type === 'tools' || turn.type === 'refusal';
    if (request.body.stream === true && answers && refusesToStream(options.cannot_stream, turn)) {
      if (queued) queue.unshift(queued);
      serve(res, { type: 'status', status: 500, body: { error: { message: 'fake server: cannot stream this answer' } } }, model, completionSeq, hanging);
      return;
    }
    if (request.body.stream === true && options.never_stream && queued) queue.unshift(queued);
    const streamed = request.body.stream === true && !options.never_stream && answers;
    if (!streamed) {
      serve(res, turn, model, completionSeq, hanging);
      return;
    }
    const answer = turn.type === 'text' ? { content: turn.content } : turn.type === 'refusal' ? { refusal: turn.refusal } : { calls: toolCalls(turn, completionSeq) };
    await writeStreamedAnswer(
      res,
      { id: `chatcmpl-${completionSeq}`, model, ...answer, usage: turn.usage ?? DEFAULT_USAGE, fault: 'stream_fault' in turn ? turn.stream_fault : undefined },
      options.stream ?? {},
      () => {
        request.first_token_at = performance.now();
      },
    ).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    push: (...turns) => queue.push(...turns),
    reset: (turns) => queue.splice(0, queue.length, ...turns),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function serve(res: ServerResponse, turn: FakeTurn, model: string, seq: number, hanging: Set<ServerResponse>): void {
  const json = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };
  switch (turn.type) {
    case 'text':
      json(200, completion(model, seq, { role: 'assistant', content: turn.content }, 'stop', turn.usage));
      return;
    case 'tools':
      json(
        200,
        completion(
          model,
          seq,
          {
            role: 'assistant',
            content: null,
            tool_calls: toolCalls(turn, seq).map(({ id, name, arguments: args }) => ({ id, type: 'function', function: { name, arguments: args } })),
          },
          'tool_calls',
          turn.usage,
        ),
      );
      return;
    case 'refusal':
      json(200, completion(model, seq, { role: 'assistant', content: null, refusal: turn.refusal }, 'stop', turn.usage));
      return;
    case 'status':
      json(turn.status, turn.body ?? { error: { message: `fake status ${turn.status}` } }, turn.headers);
      return;
    case 'malformed':
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"id": "chatcmpl-broken", "choices": [');
      return;
    case 'hang':
      hanging.add(res);
      return;
  }
}

/** Whether a server that streams badly refuses to stream `turn` (see `cannot_stream`). */
function refusesToStream(cannot: FakeOpenAIOptions['cannot_stream'], turn: FakeTurn): boolean {
  return cannot === 'always' || (cannot === 'tool_calls' && turn.type === 'tools');
}

const DEFAULT_USAGE = { prompt_tokens: 12, completion_tokens: 7 };

/** A tools turn's calls with their ids and their arguments as JSON text. */
function toolCalls(turn: Extract<FakeTurn, { type: 'tools' }>, seq: number): { id: string; name: string; arguments: string }[] {
  return turn.calls.map((call, index) => ({
    id: call.id ?? `call_${seq}_${index + 1}`,
    name: call.name,
    arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
  }));
}

function completion(model: string, seq: number, message: unknown, finish_reason: string, usage = DEFAULT_USAGE) {
  return {
    id: `chatcmpl-${seq}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}
