import type { ArcflowClient } from '@arcflow/queue';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApprovalParams, ToolResultAnswer, ToolResultBody, problems } from '../schemas.ts';

/**
 * `POST /v1/runs/{run_id}/tool-results/{tool_call_id}` (SPEC §20): a result from outside for a call
 * that waits for one — an external tool's call (a browser tool), or a handler that deferred.
 *
 * Who may answer: a key of scope `write`, or a §19 token with the `respond` action for the run
 * (its line in tokens.ts, as for approvals).
 */
export const toolResultRoutes: FastifyPluginAsyncTypebox<{ readonly client: ArcflowClient }> = async (app, { client }) => {
  app.post(
    '/v1/runs/:run_id/tool-results/:tool_call_id',
    {
      config: { scope: 'write' },
      schema: {
        summary: 'Answer a call waiting for its result from outside (a browser tool, a deferred handler); answering again returns the first answer',
        params: ApprovalParams,
        body: ToolResultBody,
        response: { 200: ToolResultAnswer, ...problems(400, 401, 403, 404, 409, 429, 503) },
      },
    },
    async (request) => client.submitToolResult(request.params.run_id, request.params.tool_call_id, request.body as { output: unknown } | { error: string }),
  );
};
