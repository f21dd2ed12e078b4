import { TENANT_PATTERN } from '@arcflow/core';
import type { ArcflowClient } from '@arcflow/queue';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { problems } from '../schemas.ts';

export interface TenantRoutesOptions {
  readonly client: ArcflowClient;
}

const TenantParams = Type.Object({ tenant: Type.String({ pattern: TENANT_PATTERN.source, description: 'a tenant name; `default` for the runs enqueued with none' }) });

const TenantStanding = Type.Object({
  tenant: Type.String(),
  active_runs: Type.Integer({ minimum: 0, description: 'runs started and not ended (running or waiting), child runs included' }),
  queued_runs: Type.Integer({ minimum: 0, description: 'runs waiting to start (queued)' }),
  cost_usd_today: Type.Number({ minimum: 0, description: "what the tenant's settled provider calls cost in the current UTC day, in USD (priced models only)" }),
});

/** `GET /v1/tenants/{tenant}` (SPEC §14): where a tenant stands. Closed to end users' tokens (no line in tokens.ts). */
export const tenantRoutes: FastifyPluginAsyncTypebox<TenantRoutesOptions> = async (app, { client }) => {
  app.get(
    '/v1/tenants/:tenant',
    {
      config: { scope: 'read' },
      schema: {
        summary: "A tenant's active and queued runs and its cost today (UTC)",
        params: TenantParams,
        response: { 200: TenantStanding, ...problems(400, 401, 403, 429, 503) },
      },
    },
    async (request) => client.tenant(request.params.tenant),
  );
};
