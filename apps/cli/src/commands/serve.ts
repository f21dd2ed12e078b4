import { ConfigError } from '@arcflow/core';
import { SERVER_DEFAULTS, serverOptionsFromEnv, startServer } from '@arcflow/server';

/** `arcflow serve`: the HTTP API and console, until SIGTERM/SIGINT (returns -1: do not exit). */
export async function serveCommand(flags: { port?: string; host?: string }): Promise<number> {
  // Digits only: Number() would take '' as 0 (a random port), '0x4e21' and '1e4'.
  const port = flags.port === undefined ? SERVER_DEFAULTS.port : /^\d{1,5}$/.test(flags.port) ? Number(flags.port) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new ConfigError(`--port must be an integer from 0 to 65535, got ${JSON.stringify(flags.port)}`);
  const options = serverOptionsFromEnv();
  const server = await startServer({ ...options, host: flags.host ?? SERVER_DEFAULTS.host, port });
  const keys = options.keys ?? [];
  console.log(
    `arcflow serve: listening on ${server.url} (API under /v1, OpenAPI at /openapi.json, console at /)${
      keys.length === 0 ? '; no ARCFLOW_API_KEYS: loopback only, every request has the admin scope' : `; ${keys.length} API key(s)`
    }${options.token_secret === undefined ? '' : "; end users' tokens on (ARCFLOW_TOKEN_SECRET)"}`,
  );
  const stop = () => {
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return -1;
}
