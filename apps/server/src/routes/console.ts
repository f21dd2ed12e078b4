import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { SESSION_COOKIE, type KeyRing } from '../auth.ts';
import { type ConsoleAssets, loadConsoleAssets } from '../console-assets.ts';
import { HttpProblem } from '../problems.ts';

/**
 * The console page's headers: it loads its own script and style only (no inline code, so text
 * from a run can never run as script), talks to its own origin, and is framed by no one.
 */
const PAGE_HEADERS = Object.freeze({
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
});

export interface ConsoleRoutesOptions {
  readonly keys: KeyRing;
  readonly trace_url: string | undefined;
}

/**
 * The web console: its page and assets (built at package time), signing in with a key (kept in
 * an HttpOnly, SameSite=Strict cookie that the API then accepts), and who is signed in. The
 * console reads everything else from the API, so it shows what the key may see and no more.
 */
export const consoleRoutes: FastifyPluginAsyncTypebox<ConsoleRoutesOptions> = async (app, { keys, trace_url }) => {
  let assets: Promise<ConsoleAssets> | undefined;
  const asset = async (name: keyof ConsoleAssets) => {
    assets ??= loadConsoleAssets();
    return (await assets)[name];
  };
  const hidden = { hide: true } as const;

  app.get('/', { config: { scope: 'none' }, schema: hidden }, async (_request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .headers(PAGE_HEADERS)
      .send(await asset('index.html')),
  );
  app.get('/console/app.js', { config: { scope: 'none' }, schema: hidden }, async (_request, reply) =>
    reply
      .type('text/javascript; charset=utf-8')
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .send(await asset('app.js')),
  );
  app.get('/console/app.css', { config: { scope: 'none' }, schema: hidden }, async (_request, reply) =>
    reply
      .type('text/css; charset=utf-8')
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .send(await asset('app.css')),
  );

  app.post(
    '/console/session',
    { config: { scope: 'none' }, schema: { ...hidden, body: Type.Object({ key: Type.String({ minLength: 1, maxLength: 500 }) }, { additionalProperties: false }) } },
    async (request, reply) => {
      const caller = keys.find(request.body.key);
      if (!caller || keys.open) throw new HttpProblem(401, 'unauthorized', keys.open ? 'this server has no API keys: nothing to sign in with' : 'that key is not valid');
      reply.setCookie(SESSION_COOKIE, request.body.key, { httpOnly: true, sameSite: 'strict', path: '/', secure: 'auto' });
      return { name: caller.name, scope: caller.scope };
    },
  );
  app.delete('/console/session', { config: { scope: 'none' }, schema: hidden }, async (_request, reply) => {
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return { signed_out: true };
  });
  app.get('/console/me', { config: { scope: 'read' }, schema: hidden }, async (request) => ({
    name: request.caller!.name,
    scope: request.caller!.scope,
    open: keys.open,
    trace_url: trace_url ?? null,
  }));
};
