import { createHash, timingSafeEqual } from 'node:crypto';
import { type TokenKeys, looksLikeToken, verifyToken } from '@arcflow/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ApiKey, Scope } from './options.ts';
import { HttpProblem } from './problems.ts';
import { queryToken } from './tokens.ts';

/** Who a request is: the key's name and scope (`local` with `admin` when no keys are set). */
export interface Caller {
  readonly name: string;
  readonly scope: Scope;
}

const RANK: Readonly<Record<Scope, number>> = { read: 0, write: 1, admin: 2 };

/** Whether `caller`'s scope covers `needed` (write includes read; admin includes write). */
export function allows(caller: Caller, needed: Scope): boolean {
  return RANK[caller.scope] >= RANK[needed];
}

export const SESSION_COOKIE = 'arcflow_session';

/**
 * Finds the key a secret belongs to. Every key is compared, each in constant time over SHA-256
 * digests (equal lengths whatever was sent), so the time taken says nothing about which key or
 * how much of one matched.
 */
export class KeyRing {
  private readonly digests: readonly { key: ApiKey; digest: Buffer }[];

  constructor(readonly keys: readonly ApiKey[]) {
    this.digests = keys.map((key) => ({ key, digest: sha256(key.secret) }));
  }

  get open(): boolean {
    return this.keys.length === 0;
  }

  find(secret: string | undefined): Caller | undefined {
    if (this.open) return { name: 'local', scope: 'admin' };
    if (!secret) return undefined;
    const presented = sha256(secret);
    let found: ApiKey | undefined;
    for (const { key, digest } of this.digests) if (timingSafeEqual(presented, digest) && !found) found = key;
    return found ? { name: found.name, scope: found.scope } : undefined;
  }
}

/** The secret a request presents: `Authorization: Bearer <secret>`, else the console's session cookie. */
export function presentedSecret(authorization: string | undefined, cookie: string | undefined): string | undefined {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  return bearer?.[1] ?? cookie;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** How `serve` tells who is calling: its API keys, and the keys of `ARCFLOW_TOKEN_SECRET` when set. */
export interface Credentials {
  readonly keys: KeyRing;
  readonly tokens: TokenKeys | undefined;
}

/**
 * Who a request is, from `Authorization: Bearer`, the console's cookie or (where its route allows)
 * `?token=`: an API key first, then an end user's token (a JWT's shape; with no keys set too,
 * so that a token keeps its scope on a loopback server), else the open server's `local` caller.
 * A key's scope is checked here; a token's rule is checked once the body is parsed (`checkTokenRequest`).
 */
export async function authenticate(request: FastifyRequest, reply: FastifyReply, { keys, tokens }: Credentials): Promise<void> {
  const needed = request.routeOptions.config?.scope ?? 'read';
  if (needed === 'none') return;
  const inQuery = queryToken(request);
  if (inQuery !== undefined) {
    // A URL's secret leaks through Referer and caches: neither may keep it.
    reply.header('referrer-policy', 'no-referrer').header('cache-control', 'no-store');
  }
  const presented = presentedSecret(request.headers.authorization, request.cookies[SESSION_COOKIE]) ?? inQuery;
  const key = keys.open ? undefined : keys.find(presented);
  if (key) {
    if (!allows(key, needed)) throw new HttpProblem(403, 'forbidden', `this key's scope is '${key.scope}'; this needs '${needed}'`);
    request.caller = key;
    return;
  }
  if (presented !== undefined && looksLikeToken(presented)) {
    if (!tokens) throw new HttpProblem(401, 'unauthorized', 'this server takes no tokens: ARCFLOW_TOKEN_SECRET is not set');
    const verdict = await verifyToken(presented, tokens);
    if (!verdict.ok) {
      throw new HttpProblem(
        401,
        'unauthorized',
        verdict.reason === 'expired' ? 'the token has expired; get a new one' : 'the token is not valid (altered, or signed with a secret this server does not hold)',
      );
    }
    request.grant = verdict.grant;
    // Rate-limited per token; never a route's `admin` or `write`: what a token may do is its rule's to say.
    request.caller = { name: `token:${verdict.grant.token_id}`, scope: 'read' };
    return;
  }
  if (keys.open) {
    request.caller = { name: 'local', scope: 'admin' };
    return;
  }
  throw new HttpProblem(401, 'unauthorized', 'send a valid API key as Authorization: Bearer <secret>');
}
