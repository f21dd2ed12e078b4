/**
 * What a client given no `redis` or `prefix` reads, as the CLI does: `REDIS_URL` and
 * `ARCFLOW_PREFIX` (empty counts as unset).
 */
export function clientEnv(env: NodeJS.ProcessEnv = process.env): { redis?: string; prefix?: string } {
  return { ...(env.REDIS_URL ? { redis: env.REDIS_URL } : {}), ...(env.ARCFLOW_PREFIX ? { prefix: env.ARCFLOW_PREFIX } : {}) };
}
