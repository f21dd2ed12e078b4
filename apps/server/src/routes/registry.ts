import type { ArcflowClient } from '@arcflow/queue';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import type { Redis } from 'ioredis';
import { HttpProblem } from '../problems.ts';
import { Agents, Queues, problems } from '../schemas.ts';

export interface RegistryRoutesOptions {
  readonly client: ArcflowClient;
  readonly redis: Redis;
}

/** What is deployed (agents, workflows, queues) and whether this server is up and can reach Redis. */
export const registryRoutes: FastifyPluginAsyncTypebox<RegistryRoutesOptions> = async (app, { client, redis }) => {
  app.get(
    '/v1/agents',
    { config: { scope: 'read' }, schema: { summary: 'Agents and workflows registered under the prefix', response: { 200: Agents, ...problems(401, 429, 503) } } },
    async () => ({
      agents: (await client.agents()).map(({ steps, tools, ...agent }) => ({
        ...agent,
        tools: [...tools],
        ...(steps ? { steps: steps.map((step) => ({ ...step, depends_on: [...step.depends_on] })) } : {}),
      })),
    }),
  );

  app.get(
    '/v1/queues',
    { config: { scope: 'read' }, schema: { summary: "Every agent's, workflow's and tool's queue: depth and live workers", response: { 200: Queues, ...problems(401, 429, 503) } } },
    async () => ({ queues: await client.queues() }),
  );

  app.get(
    '/healthz',
    { config: { scope: 'none', rateLimit: false }, schema: { summary: 'Liveness', security: [], response: { 200: Type.Object({ status: Type.Literal('ok') }) } } },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      config: { scope: 'none', rateLimit: false },
      schema: { summary: 'Readiness: Redis answers', security: [], response: { 200: Type.Object({ status: Type.Literal('ready') }), ...problems(503) } },
    },
    async () => {
      const answered = await Promise.race([
        redis.ping().then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 2_000).unref()),
      ]);
      if (!answered) throw new HttpProblem(503, 'redis_unavailable', 'Redis does not answer');
      return { status: 'ready' as const };
    },
  );
};
