import type { ArcflowClient, RunStore } from '@arcflow/queue';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import type { Redis } from 'ioredis';
import { OVERVIEW_DEFAULTS, readOverview } from '../overview.ts';
import { problems } from '../schemas.ts';

export interface OverviewRoutesOptions {
  readonly client: ArcflowClient;
  readonly store: RunStore;
  readonly redis: Redis;
  /** `ARCFLOW_PREFIX` (not `prefix`, which Fastify takes as the routes' path prefix). */
  readonly key_prefix: string;
}

const Count = Type.Integer({ minimum: 0 });
const MaybeCount = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]);

const OverviewQuery = Type.Object(
  { window: Type.Optional(Type.Union([Type.Literal('hour'), Type.Literal('day')], { description: 'the last hour (1-minute buckets, the default) or day (15-minute buckets)' })) },
  { additionalProperties: false },
);

const Overview = Type.Object({
  window: Type.Union([Type.Literal('hour'), Type.Literal('day')]),
  from: Type.Integer({ description: 'the first bucket’s start (epoch ms)' }),
  to: Type.Integer({ description: 'the last bucket’s end (epoch ms); the last bucket holds now' }),
  bucket_ms: Type.Integer(),
  runs_in_window: Type.Integer({ description: 'runs created in the window, counted in the runs index' }),
  runs_read: Type.Integer({
    description: `records read for ends, durations and tokens: the newest runs created in the window or the one before it, at most ${OVERVIEW_DEFAULTS.max_runs_read}`,
  }),
  truncated: Type.Boolean({ description: 'more runs than were read: ends, durations and tokens cover the newest' }),
  buckets: Type.Array(
    Type.Object({
      at: Type.Integer({ description: 'the bucket’s start (epoch ms)' }),
      started: Count,
      completed: Count,
      failed: Count,
      cancelled: Count,
      p50_ms: MaybeCount,
      p95_ms: MaybeCount,
      waiting: MaybeCount,
      active: MaybeCount,
      delayed: MaybeCount,
    }),
    {
      description:
        'runs created and ended per bucket (ends by status), the ended runs’ p50/p95 duration (enqueue to end), and the queues’ summed depths at the bucket’s last sample (null: no sample)',
    },
  ),
  duration_ms: Type.Object({ p50: MaybeCount, p95: MaybeCount, runs: Count }, { description: 'over every run that ended in the window' }),
  agents: Type.Array(
    Type.Object({
      name: Type.String(),
      kind: Type.Union([Type.Literal('agent'), Type.Literal('workflow')]),
      runs: Count,
      tokens: Type.Ref('Tokens'),
      cost_usd: Type.Optional(Type.Number({ description: 'when the runs’ records have usage.cost_usd (priced models)' })),
    }),
    { description: 'per agent and workflow, over the runs that ended in the window, most tokens first' },
  ),
  queues: Type.Array(Type.Object({ name: Type.String(), waiting: Count, active: Count, delayed: Count }), { description: 'every queue with jobs now' }),
});

/**
 * `GET /v1/overview` (the console's overview page): runs started and ended, durations, tokens and
 * cost per agent, and queue depths over the last hour or day, read from Redis on request
 * (docs/decisions/0027-console-overview.md).
 */
export const overviewRoutes: FastifyPluginAsyncTypebox<OverviewRoutesOptions> = async (app, options) => {
  app.get(
    '/v1/overview',
    {
      config: { scope: 'read' },
      schema: {
        summary: 'Runs, durations, tokens and queue depths over the last hour or day',
        querystring: OverviewQuery,
        response: { 200: Overview, ...problems(400, 401, 429, 503) },
      },
    },
    async (request) => {
      const window = request.query.window ?? 'hour';
      return readOverview({ client: options.client, store: options.store, redis: options.redis, prefix: options.key_prefix }, window, Date.now());
    },
  );
};
