import type { ChatRequestOptions, ChatTransport, UIMessage, UIMessageChunk } from 'ai';
import { BROWSER_TURN_END, BrowserTurn, browserAnswers } from './answers.ts';
import { sseFrames } from './sse-frames.ts';
import { userContent } from './user-content.ts';

/** Headers for every request: a record, a `Headers`, or a function giving either (e.g. a fresh token). */
export type TransportHeaders = Record<string, string> | Headers | (() => Record<string, string> | Headers | Promise<Record<string, string> | Headers>);

/** An end user's token (SPEC §19): a string, or a function that gets one from the app's backend. */
export type TransportToken = string | (() => string | Promise<string>);

export interface ArcflowChatTransportOptions {
  /** The base URL of `arcflow serve`, e.g. `https://agents.example.com` (its API is under `/v1`). */
  readonly api: string;
  /** The agent each message runs. */
  readonly agent: string;
  /**
   * An end user's token for the chat's thread (actions `read` and `send`, the agent among its
   * `agents`), minted by the app's backend with `createToken` or `POST /v1/tokens`: sent as
   * `Authorization: Bearer <token>`. A function is called for the first request, and again
   * (once) whenever the server answers 401, e.g. because the token expired.
   */
  readonly token?: TransportToken;
  /** Sent with every request (`token` sets `authorization` over them). Without a token, a key here is visible to whoever runs the page. */
  readonly headers?: TransportHeaders;
  /** The `fetch` to use (default the global one). */
  readonly fetch?: typeof fetch;
}

/** Tries in a row that brought nothing new before a dropped stream is given up. */
const MAX_TRIES_WITHOUT_PROGRESS = 5;
const RETRY_PAUSE_MS = 250;
const ACTIVE = new Set(['queued', 'running', 'waiting']);
const THREAD_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * A `ChatTransport` for AI SDK 7's `useChat` on arcflow (SPEC §12): the chat's id is an arcflow
 * thread (SPEC §11). `sendMessages` enqueues a run of `agent` on the thread whose input is the
 * last user message and returns the run's UI message stream, read from
 * `GET /v1/runs/{run_id}/stream?format=ai-sdk` and resumed with `Last-Event-ID` when the
 * connection drops. Aborting stops the reading, never the run (cancel it through the API).
 * `reconnectToStream` gives the stream of the thread's active run from its start, or `null`.
 */
export class ArcflowChatTransport<UI_MESSAGE extends UIMessage = UIMessage> implements ChatTransport<UI_MESSAGE> {
  /** A resumed stream starts from the run's beginning, so the chat resets the message it was showing. */
  readonly resumeStreamIsReplay = true;
  private readonly api: string;
  private readonly agent: string;
  private readonly headers: TransportHeaders | undefined;
  private readonly fetch: typeof fetch;
  private readonly tokenSource: TransportToken | undefined;
  /** The token the function gave last (shared by concurrent requests), until a 401 asks for another. */
  private token: Promise<string> | undefined;
  /** The last stream id this transport saw of each run: a chat answering a run's browser calls goes on from there. */
  private readonly seen = new Map<string, string>();

  constructor(options: ArcflowChatTransportOptions) {
    let url: URL;
    try {
      url = new URL(options?.api);
    } catch {
      throw new Error(`ArcflowChatTransport: api must be the base URL of arcflow serve (e.g. http://127.0.0.1:8080), got ${JSON.stringify(options?.api)}`);
    }
    if (typeof options.agent !== 'string' || options.agent === '') throw new Error(`ArcflowChatTransport: agent must name an agent, got ${JSON.stringify(options.agent)}`);
    this.api = url.href.replace(/\/+$/, '');
    this.agent = options.agent;
    this.headers = options.headers;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    if (options.token !== undefined && typeof options.token !== 'string' && typeof options.token !== 'function') {
      throw new Error('ArcflowChatTransport: token must be a string or a function that returns one');
    }
    this.tokenSource = options.token;
  }

  async sendMessages(
    options: {
      trigger: 'submit-message' | 'regenerate-message';
      chatId: string;
      messageId: string | undefined;
      messages: UI_MESSAGE[];
      abortSignal: AbortSignal | undefined;
    } & ChatRequestOptions,
  ): Promise<ReadableStream<UIMessageChunk>> {
    if (options.trigger === 'regenerate-message') {
      throw new Error('ArcflowChatTransport: regenerating a message is not supported (an arcflow thread only grows); send a new message instead');
    }
    const thread_id = checkThreadId(options.chatId);
    const last = options.messages.at(-1);
    // The browser answered its run's waiting calls (SPEC §20): the answers go to that run, whose stream goes on; no new run.
    if (last?.role === 'assistant') return this.answerRun(last, options.headers, options.abortSignal);
    if (last?.role !== 'user') throw new Error('ArcflowChatTransport: the last message of the chat must be the user message to send');
    const response = await this.request('/v1/runs', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await this.headersFor(options.headers)) },
      // A chat shows the text as it is written: its runs always ask to stream (SPEC §12).
      body: JSON.stringify({ agent: this.agent, input: [{ role: 'user', content: userContent(last) }], thread_id, stream: true }),
      signal: options.abortSignal,
    });
    const { run_id } = (await response.json()) as { run_id?: unknown };
    if (typeof run_id !== 'string') throw new Error('ArcflowChatTransport: arcflow serve answered an enqueue without a run_id');
    return this.runStream(run_id, options.headers, options.abortSignal);
  }

  /** Posts the tool outputs and approval responses of the run's message (its id is the run's), then streams on from where this chat was. */
  private async answerRun(message: UIMessage, extra: ChatRequestOptions['headers'], signal: AbortSignal | undefined): Promise<ReadableStream<UIMessageChunk>> {
    const run_id = message.id;
    const { results, approvals } = browserAnswers(message);
    const headers = { 'content-type': 'application/json', ...(await this.headersFor(extra)) };
    const post = (path: string, body: unknown) =>
      this.request(path, { method: 'POST', headers, body: JSON.stringify(body), signal }, [409]).then((response) => response.body?.cancel());
    const run = `/v1/runs/${encodeURIComponent(run_id)}`;
    // Approvals first: an approved browser tool's call then waits for the result given with it.
    for (const { tool_call_id, body } of approvals) await post(`${run}/approvals/${encodeURIComponent(tool_call_id)}`, body);
    for (const { tool_call_id, body } of results) await post(`${run}/tool-results/${encodeURIComponent(tool_call_id)}`, body);
    return this.runStream(run_id, extra, signal, this.seen.get(run_id));
  }

  async reconnectToStream(options: { chatId: string; abortSignal?: AbortSignal } & ChatRequestOptions): Promise<ReadableStream<UIMessageChunk> | null> {
    const thread_id = checkThreadId(options.chatId);
    const response = await this.request(`/v1/threads/${encodeURIComponent(thread_id)}`, { headers: await this.headersFor(options.headers), signal: options.abortSignal }, [404]);
    if (response.status === 404) return null;
    const { runs } = (await response.json()) as { runs?: { run_id?: unknown; status?: unknown }[] };
    const active = (Array.isArray(runs) ? runs : []).find((run) => typeof run?.run_id === 'string' && ACTIVE.has(String(run.status)));
    return active ? this.runStream(active.run_id as string, options.headers, options.abortSignal) : null;
  }

  /** The run's UI message stream, resumed after the last `id:` it saw whenever the connection drops. */
  private runStream(run_id: string, extra: ChatRequestOptions['headers'], outer: AbortSignal | undefined, after?: string): ReadableStream<UIMessageChunk> {
    let lastId: string | undefined = after;
    let cancelled = false;
    // Ends the reading when the run waits for the browser (the chat's turn ends there), or when the chat aborts.
    const reading = new AbortController();
    const signal = outer ? AbortSignal.any([outer, reading.signal]) : reading.signal;
    const turn = new BrowserTurn();
    const path = `/v1/runs/${encodeURIComponent(run_id)}/stream?format=ai-sdk`;
    return new ReadableStream<UIMessageChunk>({
      start: async (controller) => {
        let triesWithoutProgress = 0;
        for (;;) {
          let progressed = false;
          try {
            const headers = { accept: 'text/event-stream', ...(await this.headersFor(extra)), ...(lastId ? { 'last-event-id': lastId } : {}) };
            const response = await this.request(path, { headers, signal });
            for await (const frame of sseFrames(response.body!)) {
              if (frame.id !== undefined) {
                lastId = frame.id;
                this.seen.set(run_id, frame.id);
              }
              if (frame.data === undefined) continue;
              if (frame.data === '[DONE]') {
                controller.close();
                return;
              }
              const chunk = uiChunk(frame.data);
              controller.enqueue(chunk);
              progressed = true;
              if (turn.take(chunk) && frame.id !== undefined) {
                // The run waits for the browser: the turn ends here, and the answers come back through sendMessages.
                for (const end of BROWSER_TURN_END) controller.enqueue(end);
                controller.close();
                reading.abort();
                return;
              }
            }
          } catch (error) {
            if (cancelled || reading.signal.aborted) return;
            if (signal?.aborted || error instanceof RefusedError) {
              controller.error(signal?.aborted ? abortError(signal) : error);
              return;
            }
          }
          // The connection dropped (or ended early): resume after the last id seen.
          triesWithoutProgress = progressed ? 0 : triesWithoutProgress + 1;
          if (triesWithoutProgress >= MAX_TRIES_WITHOUT_PROGRESS) {
            controller.error(new Error(`ArcflowChatTransport: lost the stream of run ${run_id} and could not resume it`));
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS * triesWithoutProgress));
          if (cancelled) return;
        }
      },
      cancel: () => {
        cancelled = true;
        reading.abort();
      },
    });
  }

  /**
   * A request to the API; an answer that retrying cannot change (4xx but 429, or one in `accepted`)
   * is a `RefusedError` naming the problem. A 401 to a token from a function is asked once more
   * with the token the function gives then.
   */
  private async request(path: string, init: RequestInit & { headers: Record<string, string> }, accepted: readonly number[] = []): Promise<Response> {
    let response = await this.fetch(`${this.api}${path}`, init);
    if (response.status === 401 && typeof this.tokenSource === 'function' && init.headers.authorization !== undefined) {
      await response.body?.cancel();
      const renewed = await this.renewToken(init.headers.authorization);
      response = await this.fetch(`${this.api}${path}`, { ...init, headers: { ...init.headers, authorization: `Bearer ${renewed}` } });
    }
    if (response.ok || accepted.includes(response.status)) return response;
    const problem = (await response.json().catch(() => undefined)) as { detail?: unknown } | undefined;
    const detail = typeof problem?.detail === 'string' ? problem.detail : response.statusText;
    const message = `ArcflowChatTransport: arcflow serve answered ${response.status} to ${init.method ?? 'GET'} ${path.split('?')[0]}: ${detail}`;
    if (response.status >= 400 && response.status < 500 && response.status !== 429) throw new RefusedError(message);
    throw new Error(message);
  }

  private async headersFor(extra: ChatRequestOptions['headers']): Promise<Record<string, string>> {
    const base = typeof this.headers === 'function' ? await this.headers() : this.headers;
    const token = await this.currentToken();
    return {
      ...Object.fromEntries(new Headers(base ?? {})),
      ...Object.fromEntries(new Headers(extra ?? {})),
      ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
    };
  }

  private currentToken(): Promise<string> | undefined {
    const source = this.tokenSource;
    if (source === undefined) return undefined;
    if (typeof source === 'string') return Promise.resolve(source);
    this.token ??= (async () => checkToken(await source()))().catch((error: unknown) => {
      // A function that failed is asked again by the next request.
      this.token = undefined;
      throw error;
    });
    return this.token;
  }

  /** A token after a 401 to `refused` (an authorization header): the function's next one, asked once for all the requests it refused. */
  private async renewToken(refused: string): Promise<string> {
    const current = await this.currentToken()?.catch(() => undefined);
    if (current !== undefined && `Bearer ${current}` !== refused) return current;
    this.token = undefined;
    return (await this.currentToken())!;
  }
}

class RefusedError extends Error {}

function checkToken(token: unknown): string {
  if (typeof token !== 'string' || token === '')
    throw new RefusedError(`ArcflowChatTransport: the token function must return a token (a string), got ${JSON.stringify(token)?.slice(0, 40)}`);
  return token;
}

function checkThreadId(chatId: unknown): string {
  if (typeof chatId !== 'string' || !THREAD_ID.test(chatId)) {
    throw new Error(`ArcflowChatTransport: the chat id is the thread id and must match ${THREAD_ID}, got ${JSON.stringify(chatId)?.slice(0, 140)}`);
  }
  return chatId;
}

/** A `data:` line as a UI message chunk: JSON with a `type` (the chat checks each chunk's shape itself). */
function uiChunk(data: string): UIMessageChunk {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    throw new RefusedError('ArcflowChatTransport: the stream sent data that is not JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || typeof (parsed as { type?: unknown }).type !== 'string') {
    throw new RefusedError('ArcflowChatTransport: the stream sent a chunk without a type');
  }
  return parsed as UIMessageChunk;
}

function abortError(signal: AbortSignal): unknown {
  return signal.reason instanceof Error && signal.reason.name === 'AbortError' ? signal.reason : new DOMException('the stream was aborted', 'AbortError');
}
