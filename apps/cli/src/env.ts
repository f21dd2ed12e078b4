/** Everything the CLI reads from the environment, read once, here. */
export function readCliEnv(env: NodeJS.ProcessEnv = process.env) {
  return {
    redis: env.REDIS_URL || undefined,
    prefix: env.ARCFLOW_PREFIX || undefined,
    hasOpenAI: Boolean(env.OPENAI_API_KEY || env.OPENAI_BASE_URL),
    /** `arcflow token`'s secret (SPEC §19): one, or two separated by a comma (the first signs). */
    token_secret: env.ARCFLOW_TOKEN_SECRET || undefined,
  };
}
