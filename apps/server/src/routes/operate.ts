import type { ArcflowClient } from '@arcflow/queue';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { allows } from '../auth.ts';
import { HttpProblem } from '../problems.ts';
import { RunIdParams, problems } from '../schemas.ts';

/** A new run a fork or retry made, with the thread it branched when its source was on one. */
const Forked = Type.Object({
  run_id: Type.String(),
  thread_id: Type.Optional(Type.String({ description: "a fork of a thread run: the new thread (a branch of the source's) it runs on" })),
});

const ForkBody = Type.Object(
  {
    from: Type.Object(
      {
        step_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: "the step to re-run (an agent run's one step is s1)" })),
        iteration: Type.Optional(Type.Integer({ description: "the first iteration run live: from 1 to the source step's last iteration" })),
      },
      { additionalProperties: false },
    ),
    config: Type.Optional(Type.Unknown({ description: "the new run's config (default: the source's)" })),
    exec_config: Type.Optional(Type.Unknown({ description: "test mode (default: the source's); needs the 'admin' scope" })),
  },
  { additionalProperties: false },
);

const BulkBody = Type.Object(
  {
    action: Type.Union([Type.Literal('retry'), Type.Literal('cancel')]),
    filter: Type.Object(
      {
        status: Type.Union(['queued', 'running', 'waiting', 'completed', 'failed', 'cancelled'].map((status) => Type.Literal(status))),
        agent: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
        tenant: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'runs whose record names this tenant (SPEC §14)' })),
        since: Type.Optional(Type.String({ description: 'runs created at or after this ISO 8601 time' })),
      },
      { additionalProperties: false },
    ),
    dry_run: Type.Optional(Type.Boolean({ description: 'count and name the runs it would act on; change nothing' })),
  },
  { additionalProperties: false },
);

const BulkOutcome = Type.Object({
  matched: Type.Integer({ description: 'runs the filter matched' }),
  acted: Type.Integer({ description: 'runs retried or cancelled now (0 in a dry run)' }),
  run_ids: Type.Array(Type.String(), { description: 'the runs acted on (in a dry run: those it would act on)' }),
});

/**
 * Operating runs (SPEC §15): fork, retry, and bulk retry or cancel. None is open to an end user's
 * token (they are not in `tokens.ts`'s table): a fork re-runs a run with the deployment's tools.
 */
export const operateRoutes: FastifyPluginAsyncTypebox<{ client: ArcflowClient }> = async (app, { client }) => {
  app.post(
    '/v1/runs/:run_id/fork',
    {
      config: { scope: 'write' },
      schema: {
        summary: "Fork a run: a new run that replays the source's recorded rounds before from.iteration (no model call, no tool execution) and runs live from there",
        params: RunIdParams,
        body: ForkBody,
        response: { 201: Forked, ...problems(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request, reply) => {
      const { exec_config } = request.body;
      if (exec_config !== undefined && exec_config !== null && !allows(request.caller!, 'admin')) {
        throw new HttpProblem(403, 'forbidden', "test mode (exec_config) needs a key with the 'admin' scope");
      }
      return reply.status(201).send(await client.fork(request.params.run_id, request.body));
    },
  );

  app.post(
    '/v1/runs/:run_id/retry',
    {
      config: { scope: 'write' },
      schema: {
        summary: 'Retry a failed or cancelled run: a fork from the iteration it stopped at; a run is retried once (again: 200 with its retry)',
        params: RunIdParams,
        response: { 200: Forked, 201: Forked, ...problems(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request, reply) => {
      const before = (await client.get(request.params.run_id))?.retried_by;
      const retried = await client.retry(request.params.run_id);
      return reply.status(before === undefined ? 201 : 200).send(retried);
    },
  );

  app.post(
    '/v1/runs/bulk',
    {
      config: { scope: 'admin' },
      schema: {
        summary: 'Retry or cancel every run a filter matches; safe to repeat (a run is retried once, an ended run is not cancelled)',
        body: BulkBody,
        response: { 200: BulkOutcome, ...problems(400, 401, 403, 429, 503) },
      },
    },
    async (request) => client.bulk(request.body),
  );
};
