import { ConfigError, TOKEN_ACTIONS, TOKEN_DEFAULTS, type TokenKeys, checkTokenScope, signToken } from '@arcflow/core';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { HttpProblem } from '../problems.ts';
import { problems } from '../schemas.ts';

export interface TokenRoutesOptions {
  /** The keys of `ARCFLOW_TOKEN_SECRET`; none: the server mints no tokens. */
  readonly tokens: TokenKeys | undefined;
}

const TokenBody = Type.Object(
  {
    thread_id: Type.Optional(Type.String({ description: 'the thread the token is for (or run_id, never both)' })),
    run_id: Type.Optional(Type.String({ description: 'the one run the token is for (or thread_id); a run token cannot send' })),
    actions: Type.Array(Type.Union(TOKEN_ACTIONS.map((action) => Type.Literal(action))), {
      minItems: 1,
      description:
        "read: the thread's messages and its runs' records, events and streams (or the run's); send: enqueue on the thread, agents listed only; cancel: its runs; respond: its runs' approvals and results from outside",
    }),
    agents: Type.Optional(Type.Array(Type.String(), { minItems: 1, description: 'with send: the agents it may enqueue' })),
    subject: Type.Optional(Type.String({ description: "the app's user id (≤ 128 characters): runs it enqueues say enqueued_by: token:<subject>" })),
    tenant: Type.Optional(Type.String({ description: 'the tenant of the runs it enqueues; a request naming another is refused 403' })),
    expires_in_s: Type.Optional(Type.Integer({ minimum: 1, maximum: TOKEN_DEFAULTS.max_expires_in_s, description: 'seconds (default 3600)' })),
  },
  { additionalProperties: false },
);

/** `POST /v1/tokens` (SPEC §19): a `write` key mints an end user's token, signed with the first secret of `ARCFLOW_TOKEN_SECRET`. */
export const tokenRoutes: FastifyPluginAsyncTypebox<TokenRoutesOptions> = async (app, { tokens }) => {
  app.post(
    '/v1/tokens',
    {
      config: { scope: 'write' },
      // Before the body's schema: a server that mints nothing says so whatever was asked.
      preValidation: async () => {
        if (!tokens) throw new HttpProblem(400, 'tokens_disabled', 'this server mints no tokens: set ARCFLOW_TOKEN_SECRET (at least 32 bytes) to enable them');
      },
      schema: {
        summary: "Mint an end user's token for one thread or one run (HS256, signed with ARCFLOW_TOKEN_SECRET); 400 tokens_disabled without it",
        body: TokenBody,
        response: {
          201: Type.Object({
            token: Type.String({ description: 'send it as Authorization: Bearer <token>, or ?token= on the GET events and stream routes' }),
            expires_at: Type.Integer({ description: 'epoch ms' }),
          }),
          ...problems(400, 401, 403, 429),
        },
      },
    },
    async (request, reply) => {
      let scope: ReturnType<typeof checkTokenScope>;
      try {
        scope = checkTokenScope(request.body, 'POST /v1/tokens');
      } catch (error) {
        if (error instanceof ConfigError) throw new HttpProblem(400, 'invalid_request', error.message);
        throw error;
      }
      const { expires_in_s, ...rest } = scope;
      return reply.status(201).send(await signToken(rest, expires_in_s, tokens!));
    },
  );
};
