import { type StreamChunk, TERMINAL_STATUSES } from '@arcflow/core';
import type { ArcflowClient } from '@arcflow/queue';
import { unknownRun } from '@arcflow/queue/client';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { HttpProblem } from '../problems.ts';
import { RunIdParams, StreamQuery, problems } from '../schemas.ts';
import { type EventStream, MAX_HELD_BYTES, SseFrame, openEventStream } from '../sse.ts';
import type { StreamHub } from '../stream-hub.ts';
import { UI_MESSAGE_STREAM_HEADERS, UiMessageTranslator, uiFrames, wantsUiMessageStream } from '../ui-message-stream.ts';

export interface StreamRoutesOptions {
  readonly client: ArcflowClient;
  readonly hub: StreamHub;
  readonly heartbeat_ms: number;
  /** The key prefix runs are looked for under (named when one is unknown, as the client names it). */
  readonly key_prefix: string;
}

/**
 * `GET /v1/runs/{run_id}/stream` (SPEC §12): the run's stream as Server-Sent Events (`id:` the
 * offset, `event:` the type, `data:` the chunk), following the run until its `end`; or, asked for
 * the AI SDK format, the UI message stream `useChat` reads. Every connection is served by the
 * stream hub (one shared blocking read for all of them); a client that goes away stops its part
 * of the reading, never the run; one that reads too slowly is disconnected (see `openEventStream`).
 */
export const streamRoutes: FastifyPluginAsyncTypebox<StreamRoutesOptions> = async (app, { client, hub, heartbeat_ms, key_prefix }) => {
  app.get(
    '/v1/runs/:run_id/stream',
    {
      config: { scope: 'read' },
      schema: {
        summary:
          "A run's stream of text as the model writes it (Server-Sent Events: id: offset, event: type, data: the chunk), until the run ends; Last-Event-ID or ?after=n resumes after n; ?format=ai-sdk or x-vercel-ai-ui-message-stream: v1 answers in the AI SDK UI message stream protocol",
        params: RunIdParams,
        querystring: StreamQuery,
        headers: Type.Object({
          'last-event-id': Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$' })),
          'x-vercel-ai-ui-message-stream': Type.Optional(Type.String()),
        }),
        response: {
          200: { description: 'text/event-stream', content: { 'text/event-stream': { schema: Type.Ref('StreamChunk') } } },
          204: Type.Null({ description: 'the run has ended and its stream has nothing after the offset asked for' }),
          ...problems(400, 401, 404, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const { run_id } = request.params;
      const run = await client.get(run_id);
      if (!run) throw new HttpProblem(404, 'unknown_run', unknownRun(run_id, key_prefix).message);
      const after = Number(request.headers['last-event-id'] ?? request.query.after ?? 0);
      const aiSdk = wantsUiMessageStream(request.query.format, request.headers['x-vercel-ai-ui-message-stream']);
      // The UI message stream is rebuilt from the start, so a resume continues in the state the reader had.
      const from = aiSdk ? 0 : after;
      const ended = TERMINAL_STATUSES.has(run.status);
      // An ended run with nothing after `after`: 204, which tells an EventSource to stop reconnecting.
      if (ended && (await hub.read(run_id, from)).length === 0) return reply.status(204).send(null);
      const sse = openEventStream(reply, heartbeat_ms, aiSdk ? UI_MESSAGE_STREAM_HEADERS : {});
      const { deliver, finish } = relay(sse, client, run_id, aiSdk ? new UiMessageTranslator(run_id) : undefined, after);
      const stop = hub.follow(
        run_id,
        from,
        {
          deliver,
          drained: () => sse.drained(),
          finish: (error) => {
            // The reader resumes with Last-Event-ID; the error is the server's to log, not the reader's to see.
            if (error !== undefined) request.log.warn({ err: error, run_id }, 'run stream read failed');
            finish();
          },
        },
        ended,
      );
      sse.onClose(() => {
        stop();
        if (sse.overflowed) request.log.info({ run_id }, `SSE client disconnected: it read slower than the run streamed (more than ${MAX_HELD_BYTES} bytes held for it)`);
      });
      return reply;
    },
  );
};

/**
 * How a connection passes a run's chunks on: as SSE frames, or translated into the UI message
 * stream (frames up to `after` are the reader's already), until the run's `end`.
 */
function relay(sse: EventStream, client: ArcflowClient, run_id: string, translator: UiMessageTranslator | undefined, after: number) {
  let done = false;
  /** A failed run's end waits for its error's text. */
  let ending = false;
  const finish = () => {
    if (done) return;
    done = true;
    if (translator) sse.write('data: [DONE]\n\n');
    sse.end();
  };
  const deliver = (chunks: readonly StreamChunk[]) => {
    for (const chunk of chunks) {
      if (done || ending) return;
      if (!translator) sse.writeFrame(sseFrame(chunk));
      else if (chunk.type === 'end' && chunk.status === 'failed' && chunk.offset > after) {
        // The failure's text is the run record's: read before the last frames.
        ending = true;
        void failureText(client, run_id)
          .catch(() => undefined)
          .then((text) => {
            if (!done) sse.write(uiFrames(chunk.offset, translator.translate(chunk, text)));
            finish();
          });
        return;
      } else {
        const frame = translator.frames(chunk);
        if (chunk.offset > after && frame) sse.writeFrame(frame);
      }
      if (chunk.type === 'end') return finish();
    }
  };
  return { deliver, finish };
}

/** A chunk as an SSE frame (`id:` offset, `event:` type, `data:` the chunk), made once for all the viewers a read's chunk goes to. */
const frames = new WeakMap<StreamChunk, SseFrame>();
export function sseFrame(chunk: StreamChunk): SseFrame {
  let frame = frames.get(chunk);
  if (frame === undefined) {
    frame = new SseFrame(`id: ${chunk.offset}\nevent: ${chunk.type}\ndata: ${JSON.stringify(chunk)}\n\n`);
    frames.set(chunk, frame);
  }
  return frame;
}

/** What a failed run's UI message stream says: its error's code and message, as the run record has them. */
async function failureText(client: ArcflowClient, run_id: string): Promise<string> {
  const error = (await client.get(run_id))?.error;
  return error ? `the run failed (${error.error_code}): ${error.message}` : 'the run failed';
}
