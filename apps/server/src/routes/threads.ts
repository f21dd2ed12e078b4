import { THREAD_ID_PATTERN } from '@arcflow/core';
import type { ArcflowClient } from '@arcflow/queue';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { HttpProblem } from '../problems.ts';
import { ChatMessage, problems } from '../schemas.ts';

export interface ThreadRoutesOptions {
  readonly client: ArcflowClient;
}

const ThreadParams = Type.Object({ thread_id: Type.String({ pattern: THREAD_ID_PATTERN.source }) });

const Thread = Type.Object({
  thread_id: Type.String(),
  messages: Type.Array(ChatMessage, { description: "the thread's messages, oldest first (chat-completions shape)" }),
  runs: Type.Array(Type.Ref('RunRecord'), { description: "the thread's runs, in enqueue order" }),
});

/** `/v1/threads/{thread_id}` (SPEC §11): a thread's messages and runs, and deleting it. */
export const threadRoutes: FastifyPluginAsyncTypebox<ThreadRoutesOptions> = async (app, { client }) => {
  app.get(
    '/v1/threads/:thread_id',
    { config: { scope: 'read' }, schema: { summary: "A thread's messages and runs", params: ThreadParams, response: { 200: Thread, ...problems(400, 401, 404, 429, 503) } } },
    async (request) => {
      const { thread_id } = request.params;
      const thread = client.thread(thread_id);
      const [messages, runs] = await Promise.all([thread.messages(), thread.runs()]);
      if (messages.length === 0 && runs.length === 0) throw new HttpProblem(404, 'unknown_thread', `unknown thread '${thread_id}'`);
      return { thread_id, messages, runs };
    },
  );

  app.delete(
    '/v1/threads/:thread_id',
    {
      config: { scope: 'write' },
      schema: {
        summary: "Delete a thread's messages and line of runs (its runs stay); refused while one of its runs is active",
        params: ThreadParams,
        response: { 200: Type.Object({ thread_id: Type.String(), deleted: Type.Boolean() }), ...problems(400, 401, 403, 404, 409, 429, 503) },
      },
    },
    async (request) => {
      const { thread_id } = request.params;
      if (!(await client.thread(thread_id).delete())) throw new HttpProblem(404, 'unknown_thread', `unknown thread '${thread_id}'`);
      return { thread_id, deleted: true };
    },
  );
};
