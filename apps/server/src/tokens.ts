import type { TokenAction, TokenGrant } from '@arcflow/core';
import type { RunStore } from '@arcflow/queue';
import { Type } from '@fastify/type-provider-typebox';
import type { FastifyRequest, RouteOptions } from 'fastify';
import { HttpProblem } from './problems.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** What the end user's token presented with the request allows (SPEC §19); absent for an API key. */
    grant?: TokenGrant;
  }
}

/** What a route gives a token: the action it needs, and what the request must name of the token's. */
interface TokenRule {
  readonly action: TokenAction;
  /** `run`: the path's run is the token's run, or on its thread; `thread`: the path's thread is the token's; `enqueue`: see `checkEnqueue`. */
  readonly on: 'run' | 'thread' | 'enqueue';
  /** GET routes an EventSource reads, which cannot set headers: the token may come as `?token=`. */
  readonly query?: true;
  /** The answer names who gave it (`by`): given with a token, the token's (see `answerBy`). */
  readonly by?: true;
}

/**
 * Every route an end user's token may use, and how. Any other route answers a token 403: listing
 * runs, agents and queues; a tenant's standing; metrics; deleting a thread; minting tokens; the
 * console's session; and fork, retry and bulk actions (`POST /v1/runs/{run_id}/fork`, `…/retry`,
 * `POST /v1/runs/bulk`), which re-run a run's tools and spend the deployment's model budget, so
 * only an operator's key may ask for them.
 */
const TOKEN_RULES: Readonly<Record<string, TokenRule>> = {
  'POST /v1/runs': { action: 'send', on: 'enqueue' },
  'GET /v1/runs/:run_id': { action: 'read', on: 'run' },
  'GET /v1/runs/:run_id/events': { action: 'read', on: 'run', query: true },
  'GET /v1/runs/:run_id/stream': { action: 'read', on: 'run', query: true },
  'GET /v1/runs/:run_id/messages': { action: 'read', on: 'run' },
  'POST /v1/runs/:run_id/cancel': { action: 'cancel', on: 'run' },
  'POST /v1/runs/:run_id/approvals/:tool_call_id': { action: 'respond', on: 'run', by: true },
  'POST /v1/runs/:run_id/tool-results/:tool_call_id': { action: 'respond', on: 'run' },
  'GET /v1/threads/:thread_id': { action: 'read', on: 'thread' },
};

/** What a route needs of a token, if it takes one. */
export function tokenRule(method: string, url: string | undefined): TokenRule | undefined {
  return TOKEN_RULES[`${method} ${url ?? ''}`];
}

/**
 * `?token=` in a URL that is logged: the value replaced, so no token reaches a log line. The query
 * is taken as the router takes it (from the first `?` or `#` to the end), and a key as the query
 * parser reads it (percent-decoded, `+` a space), so `?%74oken=` and `#token=` are tokens too.
 */
export function withoutToken(url: string): string {
  const start = url.search(/[?#]/);
  if (start < 0) return url;
  const redacted = url
    .slice(start + 1)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      return equals >= 0 && queryKey(pair.slice(0, equals)) === 'token' ? `${pair.slice(0, equals)}=[redacted]` : pair;
    })
    .join('&');
  return `${url.slice(0, start + 1)}${redacted}`;
}

function queryKey(raw: string): string {
  try {
    return decodeURIComponent(raw.replaceAll('+', ' '));
  } catch {
    return raw;
  }
}

/** What `enqueued_by` says on a run enqueued with a token: `token:<subject>`, or `token` when it names none. */
export function enqueuedBy(grant: TokenGrant): string {
  return grant.subject === undefined ? 'token' : `token:${grant.subject}`;
}

const forbidden = (detail: string) => new HttpProblem(403, 'forbidden', detail);

/**
 * Checks a token's request against its route's rule, before the route's own checks (so that a
 * field the token does not allow is 403 whatever else is wrong with the body). Runs only where a
 * token was presented; reads Redis only to find the thread of a run the path names.
 */
export async function checkTokenRequest(request: FastifyRequest, grant: TokenGrant, threads: RunThreads): Promise<void> {
  const rule = tokenRule(request.method, request.routeOptions.url);
  const route = `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}`;
  if (!rule) {
    const hint = request.routeOptions.url === '/v1/runs' ? "; a token reads its thread's runs with GET /v1/threads/{thread_id}" : '';
    throw forbidden(`an end user's token cannot use ${route}; it needs an API key${hint}`);
  }
  if (!grant.actions.includes(rule.action)) throw forbidden(`this token does not allow '${rule.action}' (it allows ${grant.actions.join(', ')})`);
  const params = (request.params ?? {}) as Record<string, string | undefined>;
  if (rule.on === 'thread') {
    if (grant.thread_id === undefined) throw forbidden('this token is for one run, not a thread');
    if (params.thread_id !== grant.thread_id) throw forbidden("this token is for another thread than the path's");
  } else if (rule.on === 'run') {
    const run_id = params.run_id ?? '';
    // An unknown run and another thread's run answer the same: a token learns nothing of runs not its own.
    const own = grant.run_id !== undefined ? run_id === grant.run_id : (await threads.of(run_id)) === grant.thread_id;
    if (!own) throw forbidden(`this token is not for run '${run_id}'`);
    if (rule.by) answerBy(request, grant);
  } else {
    checkEnqueue(request, grant);
  }
}

/**
 * The thread of each run a token asked about lately. A run's thread never changes once it is
 * created, so many viewers of one run (or one viewer's many requests) read it from Redis once.
 */
export class RunThreads {
  private readonly known = new Map<string, string>();

  constructor(
    private readonly store: RunStore,
    private readonly capacity = 10_000,
  ) {}

  async of(run_id: string): Promise<string | undefined> {
    const cached = this.known.get(run_id);
    if (cached !== undefined) return cached;
    const thread_id = await this.store.threadOf(run_id);
    // Only a run found on a thread is kept: an id not (yet) a run's is asked again next time.
    if (thread_id !== undefined) {
      if (this.known.size >= this.capacity) this.known.delete(this.known.keys().next().value!);
      this.known.set(run_id, thread_id);
    }
    return thread_id;
  }
}

/**
 * A run enqueued with a token is on the token's thread, of an agent it names, and takes its
 * agent's definition as it is: `config`, `state`, test mode and idempotency keys (shared by the
 * whole deployment) need an API key. A body without `thread_id` is put on the token's thread.
 */
function checkEnqueue(request: FastifyRequest, grant: TokenGrant): void {
  if (grant.thread_id === undefined) throw forbidden('a token for one run cannot enqueue; send needs a token for a thread');
  const body = request.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return; // the schema answers 400
  const fields = body as Record<string, unknown>;
  if (fields.thread_id !== undefined && fields.thread_id !== grant.thread_id) throw forbidden(`this token enqueues on thread '${grant.thread_id}' only`);
  if (typeof fields.agent === 'string' && !(grant.agents ?? []).includes(fields.agent)) {
    throw forbidden(`this token cannot enqueue agent '${fields.agent.slice(0, 100)}' (it may enqueue ${(grant.agents ?? []).join(', ')})`);
  }
  if (fields.tenant !== undefined && grant.tenant !== undefined && fields.tenant !== grant.tenant) throw forbidden(`this token enqueues for tenant '${grant.tenant}' only`);
  for (const field of ['config', 'state', 'exec_config', 'idempotency_key'] as const) {
    if (fields[field] !== undefined) throw forbidden(`a run enqueued with a token takes no ${field}; it needs an API key`);
  }
  fields.thread_id = grant.thread_id;
}

/** An answer given with a token is by the token (`by: "token:<subject>"`, as its runs' `enqueued_by`): it cannot name someone else. */
function answerBy(request: FastifyRequest, grant: TokenGrant): void {
  const body = request.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return; // the schema answers 400
  const fields = body as Record<string, unknown>;
  const who = enqueuedBy(grant);
  if (fields.by !== undefined && fields.by !== who) throw forbidden(`an answer given with this token is by '${who}'; leave out by, or give that`);
  fields.by = who;
}

/** The `token` query parameter of the routes an EventSource reads. */
const TokenQuery = Type.Optional(
  Type.String({
    minLength: 1,
    maxLength: 4_096,
    description: "an end user's token (SPEC §19), for EventSource, which cannot send Authorization; prefer the header where you can",
  }),
);

/**
 * The OpenAPI document from the rules: every route that needs a credential answers 401 and 403;
 * the routes that take `?token=` declare it, as a parameter and as a second security scheme.
 */
export function documentTokenRoute(route: RouteOptions): void {
  const scope = (route.config as { scope?: string } | undefined)?.scope;
  const schema = route.schema as Record<string, any> | undefined;
  if (scope === 'none' || !schema || schema.hide) return;
  const problem = Type.Ref('Problem');
  schema.response = { ...(schema.response ?? {}), 401: schema.response?.[401] ?? problem, 403: schema.response?.[403] ?? problem };
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  if (!methods.some((method) => tokenRule(method, route.url)?.query)) return;
  const query = schema.querystring ?? Type.Object({});
  schema.querystring = { ...query, properties: { ...(query.properties ?? {}), token: TokenQuery } };
  schema.security = [{ bearer: [] }, { token_query: [] }];
}

/** The token a request presents in its query, where its route allows one (else a 400 saying where to put it). */
export function queryToken(request: FastifyRequest): string | undefined {
  const token = (request.query as Record<string, unknown> | undefined)?.token;
  if (token === undefined) return undefined;
  if (!tokenRule(request.method, request.routeOptions.url)?.query) {
    throw new HttpProblem(400, 'invalid_request', '?token= is taken only by GET /v1/runs/{run_id}/events and /stream (for EventSource); send Authorization: Bearer <token>');
  }
  if (typeof token !== 'string' || token === '') throw new HttpProblem(400, 'invalid_request', '?token= must be given once, with a value');
  return token;
}
