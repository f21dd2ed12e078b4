import { SignJWT, UnsecuredJWT, decodeJwt, decodeProtectedHeader } from 'jose';
import { describe, expect, it } from 'vitest';
import { createToken, tokenKeys, verifyToken } from '../src/index.ts';

const SECRET = 'first-secret-0123456789-0123456789';
const OTHER = 'other-secret-0123456789-0123456789';

describe('createToken and verifyToken (SPEC §19)', () => {
  it('makes an HS256 token for one thread that the keys of its secret accept, with its scope, subject and expiry', async () => {
    const before = Math.floor(Date.now() / 1000);
    const token = await createToken({ secret: SECRET, thread_id: 'user-7:chat', actions: ['read', 'send'], agents: ['support'], subject: 'u7', tenant: 'acme', expires_in_s: 600 });
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: 'HS256', typ: 'arcflow+jwt', kid: expect.stringMatching(/^[A-Za-z0-9_-]{11}$/) });
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ iss: 'arcflow', aud: 'arcflow-serve', sub: 'u7', thr: 'user-7:chat', act: ['read', 'send'], agt: ['support'], ten: 'acme' });
    expect(claims.exp! - claims.iat!).toBe(600);
    expect(claims.iat).toBeGreaterThanOrEqual(before);
    const verdict = await verifyToken(token, await tokenKeys(SECRET));
    expect(verdict).toEqual({
      ok: true,
      grant: {
        thread_id: 'user-7:chat',
        actions: ['read', 'send'],
        agents: ['support'],
        subject: 'u7',
        tenant: 'acme',
        token_id: claims.jti,
        expires_at_s: claims.exp,
      },
    });
    // Never the secret in the token.
    expect(Buffer.from(token.split('.').slice(0, 2).join('.'), 'base64url').toString()).not.toContain(SECRET);
    // One hour by default.
    const plain = decodeJwt(await createToken({ secret: SECRET, run_id: 'run_abc', actions: ['read'] }));
    expect(plain.exp! - plain.iat!).toBe(3_600);
    expect(plain).toMatchObject({ run: 'run_abc', act: ['read'] });
    expect(plain.sub).toBeUndefined();
  });

  it('rotates: signs with the first of two secrets; keys with either accept it; keys without its secret refuse it', async () => {
    const old = await createToken({ secret: OTHER, thread_id: 't', actions: ['read'] });
    const rotated = await createToken({ secret: `${SECRET},${OTHER}`, thread_id: 't', actions: ['read'] });
    expect(decodeProtectedHeader(rotated).kid).toBe(decodeProtectedHeader(await createToken({ secret: SECRET, thread_id: 't', actions: ['read'] })).kid);
    const both = await tokenKeys(`${SECRET}, ${OTHER}`);
    expect((await verifyToken(old, both)).ok).toBe(true);
    expect((await verifyToken(rotated, both)).ok).toBe(true);
    expect(await verifyToken(old, await tokenKeys(SECRET))).toEqual({ ok: false, reason: 'invalid' });
  });

  it('refuses tampered, expired, unsigned and foreign tokens', async () => {
    const keys = await tokenKeys(SECRET);
    const token = await createToken({ secret: SECRET, thread_id: 'mine', actions: ['read'] });
    const [header, , signature] = token.split('.');
    const widened = Buffer.from(JSON.stringify({ ...decodeJwt(token), thr: 'theirs' })).toString('base64url');
    expect(await verifyToken(`${header}.${widened}.${signature}`, keys)).toEqual({ ok: false, reason: 'invalid' });
    const key = new TextEncoder().encode(SECRET);
    const kid = decodeProtectedHeader(token).kid!;
    const now = Math.floor(Date.now() / 1000);
    const signed = (claims: Record<string, unknown>, typ = 'arcflow+jwt') =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ, kid })
        .setIssuer('arcflow')
        .setAudience('arcflow-serve')
        .setJti('j1')
        .setIssuedAt(now - 120);
    // Expired from `exp` on, with no grace: a minute past it, and one second past it.
    for (const exp of [now - 60, now - 1]) {
      const token = await signed({ thr: 'mine', act: ['read'] })
        .setExpirationTime(exp)
        .sign(key);
      expect(await verifyToken(token, keys)).toEqual({ ok: false, reason: 'expired' });
    }
    // No expiry at all is refused (jose would accept it unless exp is required).
    expect(await verifyToken(await signed({ thr: 'mine', act: ['read'] }).sign(key), keys)).toEqual({ ok: false, reason: 'invalid' });
    // The right secret but another kind of JWT, or claims that are no scope.
    const accepted = async (claims: Record<string, unknown>, typ?: string) =>
      (
        await verifyToken(
          await signed(claims, typ)
            .setExpirationTime(now + 60)
            .sign(key),
          keys,
        )
      ).ok;
    expect(await accepted({ thr: 'mine', act: ['read'] }, 'JWT')).toBe(false);
    expect(await accepted({ thr: 'mine', act: ['admin'] })).toBe(false);
    expect(await accepted({ thr: 'mine', act: ['read'] })).toBe(true);
    const unsecured = new UnsecuredJWT({ thr: 'mine', act: ['read'] }).setIssuer('arcflow').setAudience('arcflow-serve').setJti('j').setIssuedAt().setExpirationTime('1h').encode();
    expect((await verifyToken(unsecured, keys)).ok).toBe(false);
    expect((await verifyToken('not.a.token', keys)).ok).toBe(false);
  });

  it('a token of expires_in_s: 1 is expired a second later (its exp, to the millisecond; no grace)', async () => {
    const keys = await tokenKeys(SECRET);
    const token = await createToken({ secret: SECRET, thread_id: 't', actions: ['read'], expires_in_s: 1 });
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    expect(await verifyToken(token, keys)).toEqual({ ok: false, reason: 'expired' });
  });

  it('names the problem with bad options', async () => {
    const base = { secret: SECRET, thread_id: 't', actions: ['read'] as const };
    const refusal = (options: Record<string, unknown>) =>
      createToken({ ...base, ...options } as never).then(
        () => 'made',
        (error: Error) => `${error.name}: ${error.message}`,
      );
    expect(await refusal({ secret: 'short' })).toBe('ConfigError: createToken: secret: the secret is 5 bytes; it must be at least 32 (e.g. `openssl rand -base64 48`)');
    expect(await refusal({ secret: `${SECRET},short` })).toMatch(/secret 2 of 2 is 5 bytes/);
    expect(await refusal({ secret: `${SECRET},${SECRET},${SECRET}` })).toMatch(/holds 3 secrets/);
    expect(await refusal({ run_id: 'r' })).toMatch(/name exactly one of thread_id and run_id .* got both/);
    expect(await refusal({ thread_id: undefined })).toMatch(/got neither/);
    expect(await refusal({ thread_id: 'has space' })).toMatch(/thread_id must match/);
    expect(await refusal({ actions: ['read', 'delete'] })).toBe('ConfigError: createToken: unknown action "delete" (actions: read, send, cancel, respond)');
    expect(await refusal({ actions: [] })).toMatch(/actions must be a non-empty list/);
    expect(await refusal({ actions: ['send'] })).toMatch(/send needs agents/);
    expect(await refusal({ agents: ['a'] })).toMatch(/agents limits send/);
    expect(await refusal({ thread_id: undefined, run_id: 'r', actions: ['send'], agents: ['a'] })).toMatch(/a token for one run cannot send/);
    expect(await refusal({ expires_in_s: 0 })).toMatch(/expires_in_s must be an integer from 1 to 86400 \(seconds\), got 0/);
    expect(await refusal({ expires_in_s: 86_401 })).toMatch(/got 86401/);
    expect(await refusal({ subject: 'x'.repeat(129) })).toMatch(/subject must be a string of 1 to 128 characters, no control characters, got 129 characters/);
    expect(await refusal({ tenant: 'a b' })).toMatch(/tenant must match/);
    expect(await refusal({ threadId: 't' })).toMatch(/unknown option 'threadId'; did you mean 'thread_id'\?/);
    expect(await refusal({ subject: 'x'.repeat(128), expires_in_s: 86_400 })).toBe('made');
  });
});
