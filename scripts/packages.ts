/** Every published package, in build order. */
export const PACKAGES = [
  'packages/core',
  'packages/telemetry',
  'packages/provider-openai',
  'packages/mcp',
  'packages/queue',
  'packages/testing',
  'apps/worker',
  'apps/server',
  'apps/cli',
  'packages/arcflow',
] as const;
