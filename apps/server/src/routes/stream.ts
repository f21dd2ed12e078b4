import { TERMINAL_STATUSES } from '@arcflow/core';
import type { ArcflowClient } from '@arcflow/queue';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { HttpProblem } from '../problems.ts';
import { RunIdParams, StreamQuery, problems } from '../schemas.ts';
import { openEventStream } from '../sse.ts';
import { UI_MESSAGE_STREAM_HEADERS, UiMessageTranslator, uiFrames, wantsUiMessageStream } from '../ui-message-stream.ts';

export interface StreamRoutesOptions {
  readonly client: ArcflowClient;
  readonly heartbeat_ms: number;
}

/**
 * `GET /v1/runs/{run_id}/stream` (SPEC §12): the run's stream as Server-Sent Events (`id:` the
 * offset, `event:` the type, `data:` the chunk), following the run until its `end`; or, asked for
 * the AI SDK format, the UI message stream `useChat` reads. Each connection reads with a Redis
 * connection of its own; a client that goes away stops the reading, never the run.
 */
export const streamRoutes: FastifyPluginAsyncTypebox<StreamRoutesOptions> = async (app, { client, heartbeat_ms }) => {
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
      if (!run) throw new HttpProblem(404, 'unknown_run', `unknown run '${run_id}'`);
      const after = Number(request.headers['last-event-id'] ?? request.query.after ?? 0);
      const aiSdk = wantsUiMessageStream(request.query.format, request.headers['x-vercel-ai-ui-message-stream']);
      // The UI message stream is rebuilt from the start, so a resume continues in the state the reader had.
      const chunks = client.stream(run_id, { after: aiSdk ? 0 : after })[Symbol.asyncIterator]();
      // An ended run with nothing after `after`: 204, which tells an EventSource to stop reconnecting.
      const first = TERMINAL_STATUSES.has(run.status) ? await chunks.next() : undefined;
      if (first?.done) return reply.status(204).send(null);
      const sse = openEventStream(reply, heartbeat_ms, aiSdk ? UI_MESSAGE_STREAM_HEADERS : {});
      let gone = false;
      sse.onClose(() => {
        gone = true;
        void chunks.return?.();
      });
      const translator = aiSdk ? new UiMessageTranslator(run_id) : undefined;
      try {
        for (let next = first ?? (await chunks.next()); !next.done && !gone; next = await chunks.next()) {
          const chunk = next.value;
          if (!translator) sse.write(`id: ${chunk.offset}\nevent: ${chunk.type}\ndata: ${JSON.stringify(chunk)}\n\n`);
          else {
            const frames = translator.translate(chunk, chunk.type === 'end' && chunk.status === 'failed' ? await failureText(client, run_id) : undefined);
            if (chunk.offset > after && frames.length > 0) sse.write(uiFrames(chunk.offset, frames));
          }
        }
        if (translator && !gone) sse.write('data: [DONE]\n\n');
      } catch (error) {
        // The reader resumes with Last-Event-ID; the error is the server's to log, not the reader's to see.
        request.log.warn({ err: error, run_id }, 'run stream read failed');
      } finally {
        sse.end();
      }
      return reply;
    },
  );
};

/** What a failed run's UI message stream says: its error's code and message, as the run record has them. */
async function failureText(client: ArcflowClient, run_id: string): Promise<string> {
  const error = (await client.get(run_id))?.error;
  return error ? `the run failed (${error.error_code}): ${error.message}` : 'the run failed';
}
