import { ConfigError, RequestError, tokenKeys } from '@arcflow/core';
import {
  type ArcflowClient,
  CONNECTION_DEFAULTS,
  RunStore,
  checkRunId,
  closeRedis,
  redisRefusal,
  connectRedis,
  createClient,
  duplicateRedis,
  keysFor,
  resolveConnection,
} from '@arcflow/queue';
import cookie from '@fastify/cookie';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { Redis } from 'ioredis';
import { type Caller, KeyRing, authenticate } from './auth.ts';
import { drainOversizeBody } from './body-limit.ts';
import { EventHub } from './event-hub.ts';
import { StreamHub } from './stream-hub.ts';
import { SERVER_DEFAULTS, type Scope, type ServerOptions, isLoopback } from './options.ts';
import { HttpProblem, MAX_PARAM_LENGTH, type Problem as ProblemBody, problem, problemFor } from './problems.ts';
import { consoleRoutes } from './routes/console.ts';
import { metricsRoutes } from './routes/metrics.ts';
import { overviewRoutes } from './routes/overview.ts';
import { registryRoutes } from './routes/registry.ts';
import { runRoutes } from './routes/runs.ts';
import { operateRoutes } from './routes/operate.ts';
import { streamRoutes } from './routes/stream.ts';
import { threadRoutes } from './routes/threads.ts';
import { tenantRoutes } from './routes/tenants.ts';
import { tokenRoutes } from './routes/tokens.ts';
import { toolResultRoutes } from './routes/tool-results.ts';
import { Problem, RunError, RunRecord, StreamChunk, Tokens, TraceEvent } from './schemas.ts';
import { RunThreads, checkTokenRequest, documentTokenRoute, withoutToken } from './tokens.ts';
import { bodiesAsSent } from './validation.ts';

declare module 'fastify' {
  interface FastifyRequest {
    caller?: Caller;
  }
  interface FastifyContextConfig {
    /** The scope a route needs; `none` for the health checks and the console's page. */
    scope?: Scope | 'none';
  }
}

/** The largest request body: an input at the client's limit, with config and test mode beside it. */
const BODY_LIMIT_BYTES = 1024 * 1024;

export interface ArcflowServer {
  readonly app: FastifyInstance;
  readonly hub: EventHub;
  /** Follows every SSE client's run stream through one blocking read. */
  readonly streams: StreamHub;
  /** Stops listening, ends open event streams, and disconnects. */
  close(): Promise<void>;
}

/** The Redis connections a server holds: the client's, its own (named, so CLIENT LIST shows what serve holds) and the event subscriber. */
interface ServerConnections {
  readonly client: ArcflowClient;
  readonly redis: Redis;
  readonly subscriber: Redis;
}

/**
 * The HTTP API and console (SPEC §8) on Fastify: routes declared with TypeBox schemas, which
 * Fastify validates requests against and `@fastify/swagger` turns into the OpenAPI 3.1 document
 * at `/openapi.json`. Holds no state of its own: any number may run beside the workers.
 */
export async function buildServer(options: ServerOptions = {}): Promise<ArcflowServer> {
  const connection = resolveConnection({ ...(options.redis ? { redis: options.redis } : {}), ...(options.prefix ? { prefix: options.prefix } : {}) });
  const keys = new KeyRing(options.keys ?? []);
  const tokens = options.token_secret === undefined ? undefined : await tokenKeys(options.token_secret);
  const { client, redis, subscriber } = await openConnections(connection);
  const app = createApp(options);
  jsonBodies(app);
  const store = new RunStore(redis, connection.prefix, CONNECTION_DEFAULTS.retention_seconds);
  const hub = new EventHub(store, subscriber, (error) => app.log.warn({ err: error }, 'event hub read failed'));
  const streams = new StreamHub(
    store,
    redis,
    // Opened when the first run's stream is followed; a blocking read holds it.
    () => {
      const reader = duplicateRedis(redis, { maxRetriesPerRequest: 1, connectionName: 'arcflow:serve:streams' });
      reader.on('error', () => undefined);
      return reader;
    },
    (error) => app.log.warn({ err: error }, 'stream hub read failed'),
  );

  await registerDocumentation(app, options);
  await guardRequests(app, options, { keys, tokens, store });
  handleProblems(app);

  await app.register(runRoutes, { client, hub, heartbeat_ms: options.heartbeat_ms ?? SERVER_DEFAULTS.heartbeat_ms, key_prefix: connection.prefix });
  await app.register(streamRoutes, { client, hub: streams, heartbeat_ms: options.heartbeat_ms ?? SERVER_DEFAULTS.heartbeat_ms, key_prefix: connection.prefix });
  await app.register(operateRoutes, { client });
  await app.register(threadRoutes, { client });
  await app.register(tenantRoutes, { client });
  await app.register(tokenRoutes, { tokens });
  await app.register(toolResultRoutes, { client });
  await app.register(registryRoutes, { client, redis });
  await app.register(consoleRoutes, { keys, trace_url: options.trace_url });
  await app.register(metricsRoutes, { redis: connection.redis, key_prefix: connection.prefix });
  await app.register(overviewRoutes, { client, redis, key_prefix: connection.prefix, store: new RunStore(redis, connection.prefix, CONNECTION_DEFAULTS.retention_seconds) });
  app.get('/openapi.json', { config: { scope: 'none' }, schema: { hide: true } }, async () => app.swagger());

  let closing: Promise<void> | undefined;
  return {
    app,
    hub,
    streams,
    close: () => {
      closing ??= (async () => {
        await hub.close();
        await streams.close();
        await app.close();
        await client.close();
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}

/** Opens the server's connections; one node of a Redis Cluster named alone would fail every request, so it is refused here (and they are closed). */
async function openConnections(connection: { readonly redis: string; readonly prefix: string }): Promise<ServerConnections> {
  const client: ArcflowClient = createClient({ redis: connection.redis, prefix: connection.prefix });
  // Named, so that CLIENT LIST shows what serve holds: with the client's own, at most 4 (SPEC §19).
  const redis = connectRedis(connection.redis, { maxRetriesPerRequest: 1, lazyConnect: false, connectionName: 'arcflow:serve' });
  redis.on('error', () => undefined); // readyz reports it
  const subscriber = duplicateRedis(redis, { maxRetriesPerRequest: null, connectionName: 'arcflow:serve:events' });
  subscriber.on('error', () => undefined);
  // One node of a Redis Cluster named alone would fail every request: refused at start instead.
  const refused = await redis.exists(keysFor(connection.prefix).partitions).then(
    () => undefined,
    (error: unknown) => redisRefusal(error, connection.redis),
  );
  if (refused) {
    await client.close();
    redis.disconnect();
    subscriber.disconnect();
    throw refused;
  }
  return { client, redis, subscriber };
}

/** The Fastify instance: its logging (no credential in a line), body limit, validation and router errors as problems. */
function createApp(options: ServerOptions) {
  return Fastify({
    logger:
      options.log === false
        ? false
        : {
            level: 'info',
            redact: ['req.headers.authorization', 'req.headers.cookie'],
            // The request as logged: its URL without a `?token=` value (a token is never logged).
            serializers: {
              req: (request) => ({
                method: request.method,
                url: withoutToken(request.url),
                host: request.host,
                remoteAddress: request.ip,
                remotePort: request.socket?.remotePort,
              }),
            },
          },
    bodyLimit: BODY_LIMIT_BYTES,
    // Event streams stay open until their run ends: closing the server closes them too.
    forceCloseConnections: true,
    // An unknown field is refused, not dropped: a typo in a request should not pass unnoticed.
    ajv: { customOptions: { removeAdditional: false } },
    schemaController: { compilersFactory: { buildValidator: bodiesAsSent() } },
    // Errors the router meets before any route (a path segment too long, a malformed URL) answer as problems too.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: (error, _request, reply) => sendProblem(reply as FastifyReply, problemFor(error)),
  }).withTypeProvider<TypeBoxTypeProvider>();
}

/**
 * Bodies are JSON only: as Fastify parses them (prototype poisoning refused), an empty one taken
 * as none — a client may say `Content-Type: application/json` on a POST that carries nothing
 * (`cancel`), and a route that needs a body refuses its absence by its schema. Any other type,
 * `text/plain` too (which a browser may send across origins without asking first), is 415.
 */
function jsonBodies(app: App): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') {
      done(null, undefined);
      return;
    }
    parseJson(request, body as string, (error, parsed) => {
      if (!error) return done(null, parsed);
      // The parser refuses valid JSON with a key that would reach an object's prototype, saying only "invalid".
      done(validJson(body as string) ? new HttpProblem(400, 'invalid_request', PROTOTYPE_KEY) : error, undefined);
    });
  });
}

const PROTOTYPE_KEY = 'the request body has a property named __proto__ (or constructor.prototype), which this API refuses';

function validJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The app as `createApp` makes it. */
type App = ReturnType<typeof createApp>;

/** The shared schemas, the OpenAPI document's plugin, cookies and CORS (when origins are given). */
async function registerDocumentation(app: App, options: ServerOptions): Promise<void> {
  for (const schema of [Problem, Tokens, RunError, RunRecord, TraceEvent, StreamChunk]) app.addSchema(schema);
  // Before any route: each is documented with its 401 and 403, and ?token= where it takes one.
  app.addHook('onRoute', documentTokenRoute);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'arcflow', version: '0.2.0', description: 'Enqueue, follow and cancel runs of arcflow agents and workflows.' },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: "an ARCFLOW_API_KEYS secret, or an end user's token (POST /v1/tokens, SPEC §19)" },
          token_query: { type: 'apiKey', in: 'query', name: 'token', description: "an end user's token in the URL, on the GET events and stream routes only (EventSource)" },
        },
      },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => String(json.$id ?? `def-${index}`) },
  });
  await app.register(cookie);
  if (options.cors_origins && options.cors_origins.length > 0) await app.register(cors, { origin: [...options.cors_origins], credentials: false });
}

/** Who is calling and what a token may do, an oversize body's answer, and the rate limit per key or token. */
async function guardRequests(
  app: App,
  options: ServerOptions,
  { keys, tokens, store }: { readonly keys: KeyRing; readonly tokens: Awaited<ReturnType<typeof tokenKeys>> | undefined; readonly store: RunStore },
): Promise<void> {
  // Who is calling, before the rate limit (which counts per key or token) and the routes (which check scope).
  app.addHook('onRequest', (request, reply) => authenticate(request, reply, { keys, tokens }));
  // What a token may do, once the body is parsed and before any route's own checks (SPEC §19).
  const threads = new RunThreads(store);
  app.addHook('preValidation', async (request) => {
    // A run id in the path is checked as the client checks it (invalid_run_id, in its words), before the route's schema.
    const run_id = (request.params as { run_id?: unknown } | undefined)?.run_id;
    if (run_id !== undefined) checkRunId(run_id);
    if (request.grant) await checkTokenRequest(request, request.grant, threads);
  });
  // An oversize body is read (within a bound) before its 413, so clients that send it all before reading get the answer.
  app.addHook('preParsing', drainOversizeBody());
  await app.register(rateLimit, {
    max: options.rate_per_second ?? SERVER_DEFAULTS.rate_per_second,
    timeWindow: 1_000,
    keyGenerator: (request) => (request.caller ? `key:${request.caller.name}` : `ip:${request.ip}`),
    errorResponseBuilder: (_request, context) => new HttpProblem(429, 'rate_limited', `more than ${context.max} requests per second; retry after ${context.after}`),
  });
}

/** Every error and unknown route answers as a problem (RFC 9457); Redis away is logged as one line. */
function handleProblems(app: App): void {
  app.setErrorHandler((error, request, reply) => {
    const body = problemFor(error);
    // Redis away is a condition, not a bug: one line, no stack.
    if (body.code === 'redis_unavailable') request.log.warn({ code: body.code, detail: body.detail }, 'request failed');
    else if (body.status >= 500) request.log.error({ err: error }, 'request failed');
    // A tenant over its runs_per_minute (SPEC §14): when to ask again.
    if (error instanceof RequestError && error.retry_after_seconds !== undefined) reply.header('retry-after', String(error.retry_after_seconds));
    sendProblem(reply, body);
  });
  app.setNotFoundHandler((request, reply) => sendProblem(reply, problem(404, 'not_found', `no route ${request.method} ${request.url.split('?')[0]}`)));
}

/**
 * Connections waiting to be accepted: a burst of viewers (a popular run, everyone reconnecting
 * after a deploy) is queued rather than refused or left to retry its SYN a second later (Node's
 * default is 511; the kernel's somaxconn caps it).
 */
const LISTEN_BACKLOG = 4_096;

/** Builds the server and listens; refuses an address other machines can reach unless API keys are set. */
export async function startServer(options: ServerOptions = {}): Promise<ArcflowServer & { url: string }> {
  const host = options.host ?? SERVER_DEFAULTS.host;
  const port = options.port ?? SERVER_DEFAULTS.port;
  if ((options.keys ?? []).length === 0 && !isLoopback(host)) {
    throw new ConfigError(`refusing to serve on ${host} without API keys: set ARCFLOW_API_KEYS (name:secret:scope, …) or bind 127.0.0.1`);
  }
  const server = await buildServer(options);
  try {
    return { ...server, url: await server.app.listen({ host, port, backlog: LISTEN_BACKLOG }) };
  } catch (error) {
    await server.close();
    throw listenRefusal(error, host, port);
  }
}

/** An address the server cannot listen on, as one line that says what to do; any other error as it is. */
function listenRefusal(error: unknown, host: string, port: number): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  const where = `${host}:${port}`;
  if (code === 'EADDRINUSE') return new ConfigError(`cannot listen on ${where}: the port is in use (another process holds it); try another with --port N`);
  if (code === 'EACCES') return new ConfigError(`cannot listen on ${where}: permission denied (ports below 1024 need privileges); try --port 8080`);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') return new ConfigError(`cannot listen on ${where}: no such address on this machine; check --host`);
  return error;
}

/** Answers with a problem document (RFC 9457). */
function sendProblem(reply: FastifyReply, body: ProblemBody): void {
  reply.status(body.status).type('application/problem+json').send(body);
}
