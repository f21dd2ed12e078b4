import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One turn the fake server serves. */
export type FakeTurn =
  | { type: 'text'; content: string; usage?: { prompt_tokens: number; completion_tokens: number } }
  | { type: 'tools'; calls: { name: string; arguments: unknown; id?: string }[]; usage?: { prompt_tokens: number; completion_tokens: number } }
  | { type: 'status'; status: number; headers?: Record<string, string>; body?: unknown }
  | { type: 'malformed' }
  | { type: 'hang' };

/** What the handler sees of a request. */
export interface FakeRequest {
  readonly body: Record<string, any>;
  readonly headers: IncomingMessage['headers'];
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
export async function startFakeOpenAI(options: { turns?: FakeTurn[]; fallback?: (request: FakeRequest) => FakeTurn } = {}): Promise<FakeOpenAIServer> {
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
    const request: FakeRequest = { body: JSON.parse(Buffer.concat(chunks).toString('utf8')), headers: req.headers };
    requests.push(request);
    const turn = queue.shift() ?? options.fallback?.(request) ?? { type: 'status', status: 500, body: { error: { message: 'fake server: no turn queued' } } };
    completionSeq += 1;
    serve(res, turn, request.body.model ?? 'fake-model', completionSeq, hanging);
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
            tool_calls: turn.calls.map((call, index) => ({
              id: call.id ?? `call_${seq}_${index + 1}`,
              type: 'function',
              function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments) },
            })),
          },
          'tool_calls',
          turn.usage,
        ),
      );
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

function completion(model: string, seq: number, message: unknown, finish_reason: string, usage = { prompt_tokens: 12, completion_tokens: 7 }) {
  return {
    id: `chatcmpl-${seq}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}
