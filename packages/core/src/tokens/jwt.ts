import { ConfigError } from '../errors.ts';
import {
  TOKEN_AUDIENCE,
  TOKEN_DEFAULTS,
  TOKEN_ISSUER,
  TOKEN_TYPE,
  type TokenGrant,
  type TokenOptions,
  type TokenScope,
  checkTokenScope,
  grantOf,
  scopeClaims,
  tokenSecrets,
} from './claims.ts';

/** The keys of an `ARCFLOW_TOKEN_SECRET`: the first signs; each verifies the tokens whose `kid` names it. */
export interface TokenKeys {
  readonly signing: { readonly kid: string; readonly key: CryptoKey };
  readonly verifying: ReadonlyMap<string, CryptoKey>;
}

/** Why a token was refused: it expired, or it is not one this server signed (tampered, another secret, not arcflow's). */
export type TokenVerdict = { readonly ok: true; readonly grant: TokenGrant } | { readonly ok: false; readonly reason: 'expired' | 'invalid' };

/**
 * Seconds a token's issue time may be ahead of the checking machine's clock (a backend whose clock
 * runs ahead). Not applied to expiry: a token is expired from its `exp` on, to the millisecond.
 */
const CLOCK_TOLERANCE_S = 5;

/** jose is loaded by the first token made or checked: a process that makes none never loads it. */
let joseModule: Promise<typeof import('jose')> | undefined;
const jose = () => {
  joseModule ??= import('jose');
  return joseModule;
};

/**
 * The keys of a secret list (see `tokenSecrets`). Each key's id is the first 8 bytes of its
 * SHA-256, so a token says which secret signed it (and which to try) without showing the secret.
 */
export async function tokenKeys(secretList: string, name?: string): Promise<TokenKeys> {
  const secrets = tokenSecrets(secretList, name);
  const keys = await Promise.all(
    secrets.map(async (secret) => {
      const bytes = new TextEncoder().encode(secret);
      const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
      // Imported once: an HMAC key given as bytes would be imported again at every sign and verify.
      const key = await crypto.subtle.importKey('raw', bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
      return { kid: base64url(digest.subarray(0, 8)), key };
    }),
  );
  return { signing: keys[0]!, verifying: new Map(keys.map(({ kid, key }) => [kid, key])) };
}

/** Signs a checked scope for `expires_in_s` seconds: the token and when it expires (epoch ms). */
export async function signToken(scope: TokenScope, expires_in_s: number, keys: TokenKeys): Promise<{ token: string; expires_at: number }> {
  const { SignJWT } = await jose();
  const issued_s = Math.floor(Date.now() / 1000);
  const expires_s = issued_s + expires_in_s;
  const jwt = new SignJWT({ ...scopeClaims(scope) })
    .setProtectedHeader({ alg: 'HS256', typ: TOKEN_TYPE, kid: keys.signing.kid })
    .setIssuer(TOKEN_ISSUER)
    .setAudience(TOKEN_AUDIENCE)
    .setIssuedAt(issued_s)
    .setExpirationTime(expires_s)
    .setJti(base64url(crypto.getRandomValues(new Uint8Array(12))));
  if (scope.subject !== undefined) jwt.setSubject(scope.subject);
  return { token: await jwt.sign(keys.signing.key), expires_at: expires_s * 1000 };
}

/**
 * Makes a token for an end user's browser (SPEC §19): HS256, for one thread or one run, allowing
 * `actions` (and, for `send`, the `agents` listed), expiring after `expires_in_s` (default 3,600).
 * Needs no Redis and no server: a backend mints one for its signed-in user and hands it over.
 * Refuses bad options with a ConfigError that names the problem (never the secret).
 *
 * ```ts
 * const token = await createToken({ secret: process.env.ARCFLOW_TOKEN_SECRET!, thread_id: `user-${user.id}`, actions: ['read', 'send'], agents: ['support'], subject: user.id });
 * ```
 */
export async function createToken(options: TokenOptions): Promise<string> {
  if (options === null || typeof options !== 'object') throw new ConfigError('createToken takes an options object ({ secret, thread_id | run_id, actions, … })');
  const { secret, ...rest } = options;
  if (typeof secret !== 'string') throw new ConfigError('createToken: secret must be a string (ARCFLOW_TOKEN_SECRET) of at least 32 bytes');
  const { expires_in_s, ...scope } = checkTokenScope(rest);
  return (await signToken(scope, expires_in_s, await keysOf(secret))).token;
}

/** The keys of the secrets `createToken` was given lately: a backend minting per request derives them once. */
const recentKeys = new Map<string, Promise<TokenKeys>>();

function keysOf(secret: string): Promise<TokenKeys> {
  const known = recentKeys.get(secret);
  if (known) return known;
  tokenSecrets(secret, 'createToken: secret'); // refused here, synchronously named, before anything is kept
  const keys = tokenKeys(secret, 'createToken: secret');
  if (recentKeys.size >= 4) recentKeys.delete(recentKeys.keys().next().value!);
  recentKeys.set(secret, keys);
  return keys;
}

/**
 * Checks a token against the keys: its signature (by the secret its `kid` names), `alg`, `typ`,
 * issuer, audience, expiry and age (at most 86,400 s), then its claims' shape. Needs no Redis.
 */
export async function verifyToken(token: string, keys: TokenKeys): Promise<TokenVerdict> {
  const { jwtVerify, errors } = await jose();
  try {
    const { payload } = await jwtVerify(
      token,
      (header) => {
        const key = typeof header.kid === 'string' ? keys.verifying.get(header.kid) : undefined;
        if (!key) throw new errors.JWSSignatureVerificationFailed();
        return key;
      },
      {
        algorithms: ['HS256'],
        typ: TOKEN_TYPE,
        issuer: TOKEN_ISSUER,
        audience: TOKEN_AUDIENCE,
        requiredClaims: ['exp', 'iat', 'jti'],
        clockTolerance: CLOCK_TOLERANCE_S,
        maxTokenAge: TOKEN_DEFAULTS.max_expires_in_s,
      },
    );
    if (typeof payload.exp === 'number' && payload.exp * 1000 <= Date.now()) return { ok: false, reason: 'expired' };
    const grant = grantOf(payload as Record<string, unknown>);
    return grant ? { ok: true, grant } : { ok: false, reason: 'invalid' };
  } catch (error) {
    return { ok: false, reason: error instanceof errors.JWTExpired ? 'expired' : 'invalid' };
  }
}

/** Whether a bearer credential has a JWT's shape (three base64url parts, a JSON header first) rather than an API key's. */
export function looksLikeToken(credential: string): boolean {
  return /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(credential);
}

function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}
