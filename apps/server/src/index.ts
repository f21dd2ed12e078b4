export { buildServer, startServer, type ArcflowServer } from './server.ts';
export { type ServerOptions, type ApiKey, type Scope, SERVER_DEFAULTS, parseApiKeys, serverOptionsFromEnv, isLoopback } from './options.ts';
export { bundleConsole } from './console-assets.ts';
